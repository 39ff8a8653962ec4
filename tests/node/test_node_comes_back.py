"""The Node worker is back within a couple of seconds of its server's return, and says so.

Before: grpc-js's own reconnect backoff (growing to 120 s, every call failing
at once meanwhile) left the worker idle long after its server was back.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from inboxd.serving.embedded_pg import free_port
from inboxd_client import AsyncInboxClient
from tests.harness import REPO, serve_on_free_port

SCRIPT = REPO / "clients" / "node" / "test-support" / "comeback-worker.js"
DOWN_SECONDS = 12.0
BACK_WITHIN = 5.0


async def _seen(seen: list[str], prefix: str, within: float) -> None:
    deadline = time.monotonic() + within
    while not any(line.startswith(prefix) for line in seen):
        if time.monotonic() > deadline:
            raise AssertionError(f"no line {prefix!r} within {within:.0f} s: {seen}")
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("transport", ["work", "claim"])
async def test_the_node_worker_is_back_soon_after_its_server_and_says_so(
    database_url: str, ns: str, transport: str, tmp_path: Path
) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH: the Node worker tests need Node 20+")
    port = free_port()
    env = {"INBOXD_LISTEN": f"127.0.0.1:{port}", "INBOXD_SHUTDOWN_GRACE": "1s"}
    proc, _ = await asyncio.to_thread(serve_on_free_port, database_url, env, timeout=60)
    child = await asyncio.create_subprocess_exec(
        node, str(SCRIPT),
        env={**os.environ, "INBOXD_TARGET": f"127.0.0.1:{port}", "WORKER_NAMESPACE": ns,
             "INBOXD_WORKER_TRANSPORT": transport},
        stdout=subprocess.PIPE,
    )  # fmt: skip
    seen: list[str] = []

    async def read() -> None:
        assert child.stdout is not None
        async for raw in child.stdout:
            seen.append(raw.decode().strip())

    reader = asyncio.create_task(read())
    try:
        async with AsyncInboxClient(f"127.0.0.1:{port}") as client:
            await client.accept(ns, "before", "t", {})
        await _seen(seen, "handled before", 30)
        proc.kill()
        proc.wait()
        await asyncio.sleep(DOWN_SECONDS)
        proc, _ = await asyncio.to_thread(serve_on_free_port, database_url, env, timeout=60)
        back = time.monotonic()
        async with AsyncInboxClient(f"127.0.0.1:{port}") as client:
            await client.accept(ns, "after", "t", {})
        await _seen(seen, "handled after", 60)
        took = time.monotonic() - back
        assert took < BACK_WITHIN, f"the Node worker took {took:.1f} s to handle an event after its server came back"
        await _seen(seen, "reconnected after", 5)
        await _seen(seen, "log inboxd worker", 5)
    finally:
        child.send_signal(signal.SIGTERM)
        await asyncio.wait_for(child.wait(), 30)
        reader.cancel()
        proc.kill()
        proc.wait()
