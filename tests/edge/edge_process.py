"""An `inboxd-edge` command in a process of its own, as an operator runs it: for signals, limits and --workers."""

from __future__ import annotations

import asyncio
import os
import resource
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.edge.rig import STRIPE_NEW_SECRET, as_body, sign_stripe

SECOND_SECRET = "whsec_stripe_second_route_secret"
# A stripe route whose secret comes from the environment, and whatever tables a test adds below it.
STRIPE_ROUTE = """
[[routes]]
name = "{name}"
path = "{path}"
scheme = "stripe"
secrets_env = ["{secret_env}"]
namespace = "stripe/{{account}}"
vars = {{ account = "body:/account" }}
allowed_types = ["payment_intent.succeeded"]
"""


def routes_toml(
    target: str, *, extra: str = "", routes: tuple[tuple[str, str], ...] = (("stripe", "/hooks/stripe"),)
) -> str:
    """A routes file for inboxd at `target`: one stripe route per (name, path), then `extra` (more tables).

    The first route's secret is STRIPE_NEW_SECRET; each other route has one of its own (SECOND_SECRET):
    two routes may not share a secret.
    """
    head = f'[edge]\nlisten = "127.0.0.1:0"\n\n[inboxd]\ntarget = "{target}"\n'
    envs = ["STRIPE_WEBHOOK_SECRET", *["STRIPE_SECOND_SECRET"] * (len(routes) - 1)]
    return (
        head
        + "".join(STRIPE_ROUTE.format(name=n, path=p, secret_env=e) for (n, p), e in zip(routes, envs, strict=True))
        + extra
    )


@dataclass
class EdgeProcess:
    proc: asyncio.subprocess.Process
    url: str
    stderr: Path

    def log(self) -> str:
        return self.stderr.read_text(errors="replace")


@asynccontextmanager
async def edge_process(
    config: Path, *args: str, descriptors: int | None = None, env: dict[str, str] | None = None
) -> AsyncIterator[EdgeProcess]:
    """`python -m inboxd_edge --config config *args`, its stderr to a file beside `config`; killed at the end.

    `descriptors`: its RLIMIT_NOFILE, soft and hard (so the edge cannot raise it).
    """

    def limit() -> None:
        if descriptors is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (descriptors, descriptors))

    stderr = config.with_suffix(".stderr")
    with stderr.open("wb") as sink:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "inboxd_edge",
            "--config",
            str(config),
            *args,
            env={
                **os.environ,
                "STRIPE_WEBHOOK_SECRET": STRIPE_NEW_SECRET,
                "STRIPE_SECOND_SECRET": SECOND_SECRET,
                **(env or {}),
            },
            stdout=asyncio.subprocess.PIPE,
            stderr=sink,
            preexec_fn=limit,
        )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        assert line.startswith("inboxd-edge listening on "), f"{line!r}; stderr: {stderr.read_text()[-2000:]}"
        yield EdgeProcess(proc, "http://" + line.rsplit(" ", 1)[1].strip(), stderr)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def stripe_delivery(
    account: str | None = None, secret: str = STRIPE_NEW_SECRET, event_type: str = "payment_intent.succeeded"
) -> tuple[bytes, dict[str, str], str]:
    """A correctly signed Stripe delivery: (body, headers, its account)."""
    acct = account or f"acct_{uuid.uuid4().hex[:10]}"
    body = as_body({"id": f"evt_{uuid.uuid4().hex[:10]}", "type": event_type, "account": acct})
    return body, {"Content-Type": "application/json", **sign_stripe(body, secret)}, acct
