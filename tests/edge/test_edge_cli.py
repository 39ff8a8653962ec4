"""`python -m inboxd_edge` (the inboxd-edge command) from a TOML routes file, as an operator runs it."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid
from pathlib import Path

import aiohttp

from inboxd.serving.server import RunningServer
from inboxd.store.database import Database
from tests.edge.rig import STRIPE_NEW_SECRET, as_body, post, sign_stripe, stored_events

ROUTES_TOML = """
[edge]
listen = "127.0.0.1:0"

[inboxd]
target = "{target}"

[[routes]]
path = "/hooks/stripe"
scheme = "stripe"
secrets_env = ["STRIPE_WEBHOOK_SECRET"]
namespace = "stripe/{{account}}"
vars = {{ account = "body:/account" }}
allowed_types = ["payment_intent.succeeded"]
"""


async def test_the_command_serves_a_toml_routes_file_and_stops_cleanly_on_sigterm(
    server: RunningServer, http: aiohttp.ClientSession, db: Database, tmp_path: Path
) -> None:
    config = tmp_path / "edge.toml"
    config.write_text(ROUTES_TOML.format(target=f"127.0.0.1:{server.port}"))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "inboxd_edge",
        "--config",
        str(config),
        env={**os.environ, "STRIPE_WEBHOOK_SECRET": STRIPE_NEW_SECRET},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        assert line.startswith("inboxd-edge listening on "), line
        url = "http://" + line.rsplit(" ", 1)[1].strip()
        acct = f"acct_{uuid.uuid4().hex[:8]}"
        body = as_body({"id": "evt_cli", "type": "payment_intent.succeeded", "account": acct})
        reply = await post(http, f"{url}/hooks/stripe", body, sign_stripe(body, STRIPE_NEW_SECRET))
        assert (reply.status, reply.outcome) == (200, "accepted")
        assert set(await stored_events(db, f"stripe/{acct}")) == {"evt_cli"}
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
        _, stderr = await proc.communicate()
        # One log line per request, naming neither the secret nor the body.
        assert b'status="200" outcome="accepted"' in stderr
        assert STRIPE_NEW_SECRET.encode() not in stderr
        assert acct.encode() not in stderr
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_the_command_refuses_a_routes_file_with_a_missing_secret(tmp_path: Path) -> None:
    config = tmp_path / "edge.toml"
    config.write_text(ROUTES_TOML.format(target="127.0.0.1:1"))
    env = {k: v for k, v in os.environ.items() if k != "STRIPE_WEBHOOK_SECRET"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "inboxd_edge", "--config", str(config), env=env, stderr=asyncio.subprocess.PIPE
    )
    _, stderr = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 2
    assert b"STRIPE_WEBHOOK_SECRET" in stderr
