"""The Work stream on a real server and PostgreSQL: the subscription, pushes within credit, fenced calls.

Time is the `clock` fixture (the clocked server's): a test moves it, never sleeps a lease away.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from inboxd.serving.server import RunningServer
from inboxd.store import claims
from inboxd.store import streams as store_streams
from inboxd.store.database import Database
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.harness import eventually
from tests.integration.helpers import accept_request, read_event
from tests.integration.work_streams import Worker, fence_of


async def processing(db: Database, ns: str) -> set[str]:
    async def work(conn: object) -> set[str]:
        cur = await conn.execute(  # type: ignore[attr-defined]
            "SELECT event_key FROM inbox_events WHERE namespace = %s AND state = 'processing'", (ns,)
        )
        return {row[0] for row in await cur.fetchall()}

    return await db.run(work)


async def test_a_subscribed_stream_is_pushed_events_within_its_credit_and_completes_them(
    work: InboxServiceStub, clocked_server: RunningServer, db: Database, ns: str
) -> None:
    metrics = clocked_server.ops.metrics if clocked_server.ops else None
    assert metrics is not None
    open_before, pushed_before = metrics.work_streams._value.get(), metrics.work_pushed_events._value.get()
    for i in range(5):
        await work.Accept(accept_request(ns, f"k{i}"))
    worker = Worker(work)
    subscribed = await worker.subscribe([ns], credit=2, worker_id="w-1")
    assert metrics.work_streams._value.get() == open_before + 1
    assert subscribed.lease.ToSeconds() == 30 and subscribed.heartbeat.ToSeconds() == 10
    first = await worker.pushed(2)
    assert all(e.attempt == 1 and e.claim_token for e in first)
    assert await processing(db, ns) == {e.event_key for e in first}
    # Without credit nothing more is claimed: the stream waits for credit, not for events.
    [session] = [s for s in clocked_server.inbox.streams._live if s.subscription.worker_id == "w-1"]
    await eventually(lambda: session.credit == 0, "the credit to be spent")
    await asyncio.sleep(0.2)  # a moment for a push beyond the credit, if there were one (nothing signals its absence)
    assert len(await processing(db, ns)) == 2
    await worker.credit(3)
    rest = await worker.pushed(3)
    assert {e.event_key for e in first + rest} == {f"k{i}" for i in range(5)}
    for event in first + rest:
        result = await worker.complete(event)
        assert result.WhichOneof("result") == "complete", result
    for i in range(5):
        assert (await read_event(db, ns, f"k{i}"))["state"] == "completed"
    assert metrics.work_pushed_events._value.get() == pushed_before + 5
    assert await worker.close() == grpc.StatusCode.OK
    assert metrics.work_streams._value.get() == open_before


async def test_an_idle_stream_is_pushed_an_event_the_moment_it_is_accepted(
    work: InboxServiceStub, db: Database, ns: str
) -> None:
    worker = Worker(work)
    await worker.subscribe([ns], credit=10)
    waiting = asyncio.ensure_future(worker.pushed(1))
    await work.Accept(accept_request(ns, "late"))
    [event] = await waiting
    assert event.event_key == "late"
    result = await worker.complete(event)
    assert result.WhichOneof("result") == "complete"
    assert await worker.close() == grpc.StatusCode.OK


@pytest.mark.parametrize(
    ("first", "detail"),
    [
        (inbox_pb2.WorkRequest(credit=5), "subscribe: the first message"),
        (inbox_pb2.WorkRequest(sequence=1, complete=inbox_pb2.CompleteRequest()), "subscribe: the first message"),
        (inbox_pb2.WorkRequest(subscribe=inbox_pb2.WorkSubscription(namespaces=[""])), "subscribe.namespaces[0]"),
    ],
)
async def test_a_stream_that_does_not_open_with_a_sound_subscription_ends_invalid(
    work: InboxServiceStub, first: inbox_pb2.WorkRequest, detail: str
) -> None:
    call = work.Work()
    await call.write(first)
    assert await call.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (await call.details() or "").startswith(detail), await call.details()


@pytest.mark.parametrize("lease", [0.5, 3601.0])
async def test_a_lease_out_of_range_ends_the_stream_invalid_naming_it(work: InboxServiceStub, lease: float) -> None:
    worker = Worker(work)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await worker.subscribe(["anything"], lease=lease)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (caught.value.details() or "").startswith("subscribe.lease: "), caught.value.details()


async def test_a_second_subscription_ends_the_stream_invalid(work: InboxServiceStub, ns: str) -> None:
    worker = Worker(work)
    await worker.subscribe([ns], lease=5)
    await worker.call.write(inbox_pb2.WorkRequest(subscribe=inbox_pb2.WorkSubscription(namespaces=[ns])))
    assert await worker.call.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "one subscription" in (await worker.call.details() or "")


async def test_a_subscription_with_no_lease_gets_the_default_and_a_third_of_it_as_heartbeat(
    work: InboxServiceStub, ns: str
) -> None:
    worker = Worker(work)
    subscribed = await worker.subscribe([ns], lease=6)
    assert subscribed.lease.ToSeconds() == 6 and subscribed.heartbeat.ToSeconds() == 2
    assert await worker.close() == grpc.StatusCode.OK
    again = Worker(work)
    subscribed = await again.subscribe([ns], lease=3600)
    # A long lease still beats once a minute.
    assert subscribed.heartbeat.ToSeconds() == 60
    assert await again.close() == grpc.StatusCode.OK


async def test_a_half_close_ends_what_the_stream_still_holds_before_it_ends_ok(
    work: InboxServiceStub, db: Database, ns: str
) -> None:
    await work.Accept(accept_request(ns, "held"))
    worker = Worker(work)
    await worker.subscribe([ns], credit=1)
    [event] = await worker.pushed(1)
    assert await worker.close() == grpc.StatusCode.OK
    # Already PENDING when the stream has ended: not a lease later.
    row = await read_event(db, ns, "held")
    assert (row["state"], row["attempt"], row["claim_token"]) == ("pending", 1, None)
    assert "Work stream ended" in row["last_error"]
    again = await work.Claim(inbox_pb2.ClaimRequest(namespaces=[ns]))
    assert [e.event_key for e in again.events] == ["held"] and again.events[0].attempt == 2
    # The old token is dead.
    late = work.Complete(inbox_pb2.CompleteRequest(**fence_of(event)))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await late
    assert caught.value.code() == grpc.StatusCode.ABORTED


async def test_idle_streams_cost_the_database_nothing_and_an_event_wakes_one_of_them(
    quiet_server: RunningServer, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    looks: list[str] = []
    real_claim, real_renew = claims.claim_events, store_streams.renew_held

    async def claim_spy(*args: Any, **kwargs: Any) -> Any:
        looks.append("claim")
        return await real_claim(*args, **kwargs)

    async def renew_spy(*args: Any, **kwargs: Any) -> Any:
        looks.append("renew")
        return await real_renew(*args, **kwargs)

    monkeypatch.setattr(claims, "claim_events", claim_spy)
    monkeypatch.setattr(store_streams, "renew_held", renew_spy)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{quiet_server.port}") as channel:
        stub = InboxServiceStub(channel)
        poller = quiet_server.inbox._poller
        spared_before = poller.spared
        workers = [Worker(stub) for _ in range(10)]
        for worker in workers:
            await worker.subscribe([ns], credit=5)
        # Each stream looks once as it begins to wait, as a long-polling Claim
        # does, or is spared its look by the poller's finding that nothing is
        # due (a slow machine lets the poller's first look end before the
        # last streams subscribe).
        await eventually(lambda: len(looks) + poller.spared - spared_before >= 10, "every stream's first look")
        await asyncio.sleep(0.3)  # for the last of those looks to finish
        looks.clear()
        # Streams that hold nothing run no heartbeat timer at all.
        assert quiet_server.inbox.streams.beating() == 0
        # A heartbeat of streams that hold nothing, and a moment of idling: no statement at all.
        await quiet_server.inbox.streams.renew_all()
        await asyncio.sleep(0.3)
        assert looks == []
        await stub.Accept(accept_request(ns, "one"))
        pushed = await asyncio.wait_for(_first_push(workers), 5)
        assert pushed.event_key == "one"
        # The stream that holds it beats now, to keep its lease alive.
        assert quiet_server.inbox.streams.beating() == 1
        # One wake-up for one event: one stream looked, not ten (and perhaps once more, for its credit left).
        assert looks in (["claim"], ["claim", "claim"]), looks
        for worker in workers:
            worker.call.cancel()


async def test_a_stream_that_no_longer_holds_anything_stops_its_heartbeat(quiet_server: RunningServer, ns: str) -> None:
    streams = quiet_server.inbox.streams
    async with grpc.aio.insecure_channel(f"127.0.0.1:{quiet_server.port}") as channel:
        stub = InboxServiceStub(channel)
        await stub.Accept(accept_request(ns, "k"))
        worker = Worker(stub)
        before = streams.beating()
        await worker.subscribe([ns], credit=1, lease=1)
        [event] = await worker.pushed(1)
        assert streams.beating() == before + 1
        assert (await worker.complete(event)).WhichOneof("result") == "complete"
        # Its next beat (a third of the 1 s lease) finds nothing held, and is its last.
        await eventually(lambda: streams.beating() == before, "the heartbeat to end", within=5)
        worker.call.cancel()


async def _first_push(workers: list[Worker]) -> inbox_pb2.ClaimedEvent:
    reads = [asyncio.ensure_future(w.read()) for w in workers]
    done, pending = await asyncio.wait(reads, return_when=asyncio.FIRST_COMPLETED)
    for read in pending:
        read.cancel()
    answer = next(iter(done)).result()
    assert answer.WhichOneof("response") == "events", answer
    return answer.events.events[0]
