"""A worker is back within a couple of seconds of its server's return, and says so: not a backoff of its own later.

Before: gRPC's own reconnect backoff (1 s growing by 1.6 to 120 s) and the
worker's claim retry (0.5 s doubling to 10 s) left a worker idle for about
18 s after the server came back, and it said nothing when it did.
"""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from inboxd.serving.embedded_pg import free_port
from inboxd_client import AsyncInboxClient, EventContext, Worker
from tests.client.helpers import running
from tests.harness import serve_on_free_port

DOWN_SECONDS = 12.0
BACK_WITHIN = 5.0


@pytest.mark.parametrize("use_streams", [True, False], ids=["work-stream", "unary-claims"])
async def test_a_worker_is_back_soon_after_its_server_and_says_so(
    database_url: str, ns: str, use_streams: bool, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    env = {"INBOXD_LISTEN": f"127.0.0.1:{port}", "INBOXD_SHUTDOWN_GRACE": "1s"}
    proc, _ = await asyncio.to_thread(serve_on_free_port, database_url, env, timeout=60)
    done: list[str] = []

    async def handle(ctx: EventContext) -> None:
        done.append(ctx.event_key)

    async with AsyncInboxClient(f"127.0.0.1:{port}", timeout=10.0) as client:
        worker = Worker(client, handle, namespaces=[ns], concurrency=1, wait=1.0, use_streams=use_streams)
        try:
            with caplog.at_level(logging.INFO, logger="inboxd_client"):
                async with running(worker):
                    await client.accept(ns, "before", "t", {})
                    await _until(lambda: done == ["before"], 15, "the first event")
                    proc.kill()
                    proc.wait()
                    await asyncio.sleep(DOWN_SECONDS)  # the worker fails its claims meanwhile, backing off
                    proc, _ = await asyncio.to_thread(serve_on_free_port, database_url, env, timeout=60)
                    back = time.monotonic()
                    async with AsyncInboxClient(f"127.0.0.1:{port}", timeout=10.0) as fresh:
                        await fresh.accept(ns, "after", "t", {})
                    await _until(lambda: "after" in done, 60, "the event after the return")
                    took = time.monotonic() - back
        finally:
            proc.kill()
            proc.wait()
    assert took < BACK_WITHIN, f"the worker took {took:.1f} s to handle an event after its server came back"
    assert "connected to inboxd again" in caplog.text, caplog.text[-2000:]


async def _until(check: object, within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within:.0f} s: {what}")
        await asyncio.sleep(0.05)
