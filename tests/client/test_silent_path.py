"""A worker whose path goes silent (no FIN, no RST) notices it by its own pings: its stream ends, and it reconnects.

The path is real: the worker talks to a real server through a TCP proxy that
goes silent on demand (`TcpProxy.go_silent`). The server here pings rarely
enough to leave the noticing to the client: without the client's keepalive,
its handlers would run on, their results for nobody, until TCP gives up.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from inboxd.config.settings import Settings
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd_client import AsyncInboxClient, EventContext, Worker, connection
from tests.client.conftest import FAST_RETRY
from tests.client.helpers import accept, eventually, running
from tests.client.tcp_proxy import TcpProxy
from tests.conftest import NO_BULK_RUNNER, NO_RESCUER

RECONNECT_FAST = [("grpc.initial_reconnect_backoff_ms", 50), ("grpc.max_reconnect_backoff_ms", 200)]
# Generous for a loaded machine: the client's pings say it within about 2 s.
NOTICED_WITHIN = 30.0


@pytest.fixture(scope="module")
async def lenient_server(db: Database) -> AsyncIterator[RunningServer]:
    """Permits a client's ping every 0.5 s, and waits 60 s for its own pings' answers."""
    settings = Settings(
        listen="127.0.0.1:0",
        rescue_interval=NO_RESCUER,
        bulk_poll=NO_BULK_RUNNER,
        keepalive_time=timedelta(seconds=0.5),
        keepalive_timeout=timedelta(seconds=60),
    )
    running = await start_server(settings, db)
    yield running
    await running.stop(1.0)


async def test_a_workers_stream_ends_when_its_path_goes_silent_and_it_subscribes_again(
    lenient_server: RunningServer, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The runtime's own defaults (10 s, 5 s), made quick: a ping a second, answered within a second.
    monkeypatch.setattr(connection, "KEEPALIVE_TIME_MS", 1000, raising=False)
    monkeypatch.setattr(connection, "KEEPALIVE_TIMEOUT_MS", 1000, raising=False)
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def handle(ctx: EventContext) -> None:
        started.set()
        try:
            await asyncio.Event().wait()  # works until its claim is gone
        except asyncio.CancelledError:
            cancelled.set()
            raise

    proxy = await TcpProxy(lenient_server.port).start()
    try:
        async with AsyncInboxClient(
            f"127.0.0.1:{proxy.port}", retry=FAST_RETRY, timeout=10.0, options=RECONNECT_FAST
        ) as client:
            await accept(client, ns, "k")
            worker = Worker(client, handle, namespaces=[ns], concurrency=1, use_streams=True)
            async with running(worker):
                await asyncio.wait_for(started.wait(), 10)
                stream = worker._stream
                assert stream is not None and stream.opened == 1
                proxy.go_silent()
                went_silent = time.monotonic()
                # The stream broke: the handler is told its claim went with it, as for a lost lease.
                try:
                    await asyncio.wait_for(cancelled.wait(), NOTICED_WITHIN)
                except TimeoutError:
                    raise AssertionError(f"the handler ran on {NOTICED_WITHIN:.0f} s into the silence") from None
                noticed = time.monotonic() - went_silent
                proxy.mend()
                await eventually(
                    lambda: stream.opened >= 2 and stream.subscribed is not None, "subscribed again", within=20
                )
    finally:
        await proxy.stop()
    assert noticed < NOTICED_WITHIN, f"noticed {noticed:.1f} s after the path went silent"
    assert worker.stats.superseded == 1
