"""The async client's AcceptStream against a real server: concurrent accepts on one stream, typed errors, resends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from inboxd.serving.server import RunningServer
from inboxd.store.database import Database
from inboxd_client import AcceptOutcome, AsyncInboxClient, DeadlineExceeded, InvalidArgument
from tests.client.conftest import FAST_RETRY
from tests.client.tcp_proxy import TcpProxy
from tests.harness import eventually
from tests.integration.helpers import TableLocked, stream_items_held
from tests.integration.test_accept_stream import stored

ACCEPTED = AcceptOutcome.ACCEPT_OUTCOME_ACCEPTED
DUPLICATE = AcceptOutcome.ACCEPT_OUTCOME_DUPLICATE


async def test_concurrent_accepts_share_one_stream_and_each_gets_its_own_answer(
    client: AsyncInboxClient, db: Database, ns: str
) -> None:
    async with client.accept_stream() as stream:
        answers = await asyncio.gather(
            *(stream.accept(ns, f"k{i}", "order.paid", {"n": i}) for i in range(50)),
            stream.accept(ns, "k0", "order.paid", {"n": 0}, metadata={"delivery": "again"}),
        )
        assert stream.opened == 1
    *fresh, repeat = answers
    assert [a.outcome for a in fresh] == [ACCEPTED] * 50
    assert repeat.outcome == DUPLICATE
    assert await stored(db, ns) == {f"k{i}" for i in range(50)}


async def test_an_item_refused_raises_the_unary_calls_exception_and_the_stream_goes_on(
    client: AsyncInboxClient, ns: str
) -> None:
    async with client.accept_stream() as stream:
        with pytest.raises(InvalidArgument) as refused:
            await stream.accept(ns, "", "order.paid", {})
        assert "accept.event_key" in refused.value.details
        unary = await asyncio.gather(client.accept(ns, "", "order.paid", {}), return_exceptions=True)
        assert type(unary[0]) is type(refused.value)
        answer = await stream.accept(ns, "after", "order.paid", {})
        assert answer.outcome == ACCEPTED
        assert stream.opened == 1


async def test_an_item_unanswered_by_its_deadline_raises_deadline_exceeded_and_the_stream_goes_on(
    client: AsyncInboxClient, db: Database, ns: str
) -> None:
    async with client.accept_stream() as stream:
        async with TableLocked(db):
            with pytest.raises(DeadlineExceeded):
                await stream.accept(ns, "late", "order.paid", {}, timeout=0.2)
        # The item had reached group commit: stored, only its answer was given up on.
        again = await stream.accept(ns, "late", "order.paid", {})
        assert again.outcome == DUPLICATE


@pytest.fixture
async def proxy(server: RunningServer) -> AsyncIterator[TcpProxy]:
    running = await TcpProxy(server.port).start()
    yield running
    await running.stop()


async def test_a_stream_cut_mid_flight_loses_nothing_and_the_resend_answers_duplicate(
    server: RunningServer, proxy: TcpProxy, db: Database, ns: str
) -> None:
    reconnect_fast = [("grpc.initial_reconnect_backoff_ms", 50), ("grpc.max_reconnect_backoff_ms", 200)]
    count = 10
    async with (
        AsyncInboxClient(f"127.0.0.1:{proxy.port}", retry=FAST_RETRY, timeout=60.0, options=reconnect_fast) as client,
        client.accept_stream() as stream,
    ):
        before = await stream.accept(ns, "acknowledged", "order.paid", {})
        assert before.outcome == ACCEPTED
        async with TableLocked(db):
            callers = [asyncio.create_task(stream.accept(ns, f"k{i}", "order.paid", {"n": i})) for i in range(count)]
            # Every item read and submitted to group commit, which waits on the lock.
            await eventually(lambda: stream_items_held(server) == count, "the stream to hold every item")
            proxy.cut()
            # The server saw its stream end: those items are no one's to answer now, though they still commit.
            await eventually(lambda: stream_items_held(server) == 0, "the server to drop the cut stream")
            proxy.mend()
            # Reopened through the proxy, the unanswered items sent again, waiting behind the originals.
            await eventually(lambda: stream.opened >= 2, "the client to reopen its stream")
            await eventually(lambda: stream_items_held(server) == count, "the resent items to reach the server")
        answers = await asyncio.gather(*callers)
    # The originals committed in the group they were submitted to; each resend found its item stored.
    assert [a.outcome for a in answers] == [DUPLICATE] * count
    assert await stored(db, ns) == {"acknowledged", *(f"k{i}" for i in range(count))}
