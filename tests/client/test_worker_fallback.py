"""A Worker against a server without the Work stream: it finds out once, at run time, and claims with unary calls.

The server without Work is real: a grpc.aio server on a port of its own,
serving the real InboxService over the suite's database, but with a servicer
that lacks `Work`, so the stream is answered UNIMPLEMENTED, as an older
inboxd answers it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import grpc
import pytest

from inboxd.api.handlers import generic_handler
from inboxd.api.inbox_servicer import InboxServicer
from inboxd.serving.server import INBOX_SERVICE, RunningServer
from inboxd.store.database import Database
from inboxd_client import AsyncInboxClient, EventContext, Unimplemented, Worker
from tests.client.conftest import FAST_RETRY
from tests.client.helpers import accept, eventually, running, state_of
from tests.client.test_complete_many import RecordingClient


class WithoutWork(InboxServicer):
    """The real servicer with no Work: its stream is UNIMPLEMENTED, every unary call as ever."""

    Work = None  # type: ignore[assignment]  # generic_handler answers UNIMPLEMENTED for a method it lacks


@pytest.fixture(scope="module")
async def no_work_port(server: RunningServer) -> AsyncIterator[int]:
    """The port of a real server that serves the real Inbox but not the Work stream."""
    without = grpc.aio.server()
    without.add_generic_rpc_handlers((generic_handler(INBOX_SERVICE, WithoutWork(server.inbox)),))
    port = without.add_insecure_port("127.0.0.1:0")
    await without.start()
    yield port
    await without.stop(0)


async def handle(ctx: EventContext) -> None:
    return None


async def test_a_worker_falls_back_to_unary_claims_once_on_a_server_without_work(
    no_work_port: int, db: Database, ns: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="inboxd_client.worker")
    client = RecordingClient(f"127.0.0.1:{no_work_port}", retry=FAST_RETRY, timeout=10.0)
    async with client:
        await accept(client, ns, "k1", "k2", "k3")
        worker = Worker(client, handle, namespaces=[ns], concurrency=1, wait=1.0)
        async with running(worker):
            await eventually(lambda: worker.stats.completed == 3, "every event completed")
        assert client.claims >= 3  # one event per Claim: one slot
    said = [r for r in caplog.records if "the server has no Work stream" in r.getMessage()]
    assert [r.levelno for r in said] == [logging.INFO]  # found out once, not per Claim
    assert [await state_of(db, ns, k) for k in ("k1", "k2", "k3")] == ["completed"] * 3


async def test_use_streams_true_refuses_a_server_without_work(no_work_port: int) -> None:
    async with AsyncInboxClient(f"127.0.0.1:{no_work_port}", retry=FAST_RETRY, timeout=10.0) as client:
        worker = Worker(client, handle, use_streams=True)
        with pytest.raises(Unimplemented):
            await worker.run(handle_signals=False)
