"""The heartbeat needs the worker: a worker whose path goes silent loses its events within a bound.

The path is real: the worker talks to a real server through a TCP proxy that
goes silent on demand (`TcpProxy.go_silent`: no byte crosses it either way,
and no close either), as a partition or a frozen VM does. The server's
keepalive (serving/keepalive.py) ends the silent worker's stream, and the
stream's end hands its events to another worker. A lease shorter than the
keepalive bound is renewed no further than a lease past the worker's last
message; that part moves the `clock` by hand.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import timedelta

import grpc
import pytest

from inboxd.config.settings import Settings
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.client.tcp_proxy import TcpProxy
from tests.conftest import CLOCKED_SETTINGS, NO_BULK_RUNNER, NO_RESCUER, FakeClock
from tests.harness import ServerProcess
from tests.integration.helpers import accept_request, read_event
from tests.integration.work_streams import NOT_FOUND, Worker, fence_of

# Pings every 0.5 s, each answered within 0.5 s: a silent peer's stream ends within 1.5 s.
QUICK_KEEPALIVE = Settings(
    listen="127.0.0.1:0",
    rescue_interval=NO_RESCUER,
    bulk_poll=NO_BULK_RUNNER,
    keepalive_time=timedelta(seconds=0.5),
    keepalive_timeout=timedelta(seconds=0.5),
)
# Generous for a loaded machine: the bound is 1.5 s, and without keepalive it is the connection's age (1 h).
HANDED_ON_WITHIN = 30.0


@pytest.fixture(scope="module")
async def pinging_server(db: Database) -> AsyncIterator[RunningServer]:
    running = await start_server(QUICK_KEEPALIVE, db)
    yield running
    await running.stop(1.0)


@pytest.fixture(scope="module")
async def short_clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(scope="module")
async def clocked(db: Database, short_clock: FakeClock) -> AsyncIterator[RunningServer]:
    """A server on a hand-moved clock whose streams measure silence by it too; keepalive as by default (15 s)."""
    running = await start_server(CLOCKED_SETTINGS, db, clock=short_clock)

    def by_the_clock() -> float:
        return short_clock.now.timestamp()

    running.inbox.streams.monotonic = by_the_clock
    yield running
    await running.stop(1.0)


async def pushed_within(worker: Worker, count: int, within: float) -> list[inbox_pb2.ClaimedEvent]:
    """Reads until `count` events were pushed, for at most `within` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while len(worker.events) < count:
        left = deadline - loop.time()
        try:
            answer = await asyncio.wait_for(worker.call.read(), max(left, 0.01))
        except TimeoutError:
            raise AssertionError(f"{len(worker.events)} of {count} events pushed within {within:.0f} s") from None
        if answer.WhichOneof("response") == "events":
            worker.events.extend(answer.events.events)
    return worker.events


async def hand_on_a_silent_workers_events(port: int, ns: str) -> float:
    """Two events go to a worker behind the proxy, its path goes silent, and another worker subscribes.

    Returns how long after the silence both were pushed to the other worker,
    which completes them; they come at attempt 2, the silent one's counted.
    """
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as direct:
        stub = InboxServiceStub(direct)
        for key in ("a", "b"):
            await stub.Accept(accept_request(ns, key))
        proxy = await TcpProxy(port).start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{proxy.port}") as far:
                silent = Worker(InboxServiceStub(far))
                await silent.subscribe([ns], credit=2, worker_id="behind-a-silent-path")
                await silent.pushed(2)
                proxy.go_silent()
                went_silent = time.monotonic()
                other = Worker(stub)
                await other.subscribe([ns], credit=2, worker_id="the-other")
                taken = await pushed_within(other, 2, HANDED_ON_WITHIN)
                handed_on = time.monotonic() - went_silent
                silent.call.cancel()
        finally:
            await proxy.stop()
        assert sorted(e.event_key for e in taken) == ["a", "b"]
        assert {e.attempt for e in taken} == {2}  # the silent worker's attempt counted, as a crash's is
        for event in taken:
            assert (await other.complete(event)).WhichOneof("result") == "complete"
        assert await other.close() == grpc.StatusCode.OK
    return handed_on


async def test_a_silent_workers_events_go_to_another_worker_within_the_keepalive_bound(
    pinging_server: RunningServer, db: Database, ns: str
) -> None:
    handed_on = await hand_on_a_silent_workers_events(pinging_server.port, ns)
    assert handed_on < HANDED_ON_WITHIN, f"handed on {handed_on:.1f} s after the path went silent"
    # Not by a lapsed lease (30 s): the silent worker's stream ended.
    assert "behind-a-silent-path" not in [s.worker_id for s in pinging_server.inbox.streams.live()]
    assert (await read_event(db, ns, "a"))["state"] == "completed"


async def test_inboxd_serve_takes_its_keepalive_from_the_environment(migrated_url: str, ns: str) -> None:
    server = await asyncio.to_thread(
        ServerProcess(
            database_url=migrated_url, env={"INBOXD_KEEPALIVE_TIME": "500ms", "INBOXD_KEEPALIVE_TIMEOUT": "500ms"}
        ).start
    )
    try:
        handed_on = await hand_on_a_silent_workers_events(server.port, ns)
    finally:
        server.kill()
    assert handed_on < HANDED_ON_WITHIN, f"handed on {handed_on:.1f} s after the path went silent"


async def test_a_short_lease_is_renewed_no_further_than_a_lease_past_the_workers_last_word(
    clocked: RunningServer, short_clock: FakeClock, ns: str
) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{clocked.port}") as chan:
        stub = InboxServiceStub(chan)
        await stub.Accept(accept_request(ns, "k"))
        quiet = Worker(stub)
        # 3 s is under the keepalive bound (15 s): its connection may outlive a lease of silence.
        await quiet.subscribe([ns], credit=1, lease=3)
        [event] = await quiet.pushed(1)
        short_clock.advance(2)
        await clocked.inbox.streams.renew_all()  # renews to its last word + 3 s, not to now + 3 s
        short_clock.advance(1.5)
        taken = await stub.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], worker_id="taker"))
        assert [e.event_key for e in taken.events] == ["k"]
        assert taken.events[0].attempt == 2
        # The quiet worker was fenced off, as any worker whose lease lapsed.
        assert (await quiet.complete(event)).error.code != 0
        quiet.call.cancel()


async def test_a_short_lease_lives_on_while_the_worker_speaks_on_its_stream(
    clocked: RunningServer, short_clock: FakeClock, ns: str
) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{clocked.port}") as chan:
        stub = InboxServiceStub(chan)
        await stub.Accept(accept_request(ns, "k"))
        worker = Worker(stub)
        await worker.subscribe([ns], credit=1, lease=3)
        [event] = await worker.pushed(1)
        for _ in range(3):
            short_clock.advance(2)
            # Any message is a word; this one's answer (no such claim) says the server read it.
            gone = await worker.ask(complete=inbox_pb2.CompleteRequest(namespace=ns, event_key="none", claim_token="x"))
            assert gone.error.code == NOT_FOUND
            await clocked.inbox.streams.renew_all()
        short_clock.advance(1.5)
        taken = await stub.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], worker_id="taker"))
        assert list(taken.events) == []
        assert (await worker.ask(complete=inbox_pb2.CompleteRequest(**fence_of(event)))).WhichOneof(
            "result"
        ) == "complete"
        assert await worker.close() == grpc.StatusCode.OK


async def test_a_long_lease_needs_no_word_from_the_worker(
    clocked: RunningServer, short_clock: FakeClock, ns: str
) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{clocked.port}") as chan:
        stub = InboxServiceStub(chan)
        await stub.Accept(accept_request(ns, "k"))
        worker = Worker(stub)
        # 30 s is over the bound: keepalive, not the worker's word, says the worker is there.
        await worker.subscribe([ns], credit=1, lease=30)
        [event] = await worker.pushed(1)
        short_clock.advance(40)
        await clocked.inbox.streams.renew_all()
        short_clock.advance(20)
        taken = await stub.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], worker_id="taker"))
        assert list(taken.events) == []
        assert (await worker.complete(event)).WhichOneof("result") == "complete"
        assert await worker.close() == grpc.StatusCode.OK


async def test_a_worker_that_pings_as_the_runtimes_do_is_not_told_too_many_pings(
    pinging_server: RunningServer, ns: str
) -> None:
    # The runtimes ping every 10 s, against the 5 s the server permits; scaled: 1 s against 0.5 s.
    pings = [
        ("grpc.keepalive_time_ms", 1000),
        ("grpc.keepalive_timeout_ms", 1000),
        ("grpc.http2.ping_timeout_ms", 1000),
        ("grpc.http2.max_pings_without_data", 0),
    ]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{pinging_server.port}", options=pings) as chan:
        stub = InboxServiceStub(chan)
        worker = Worker(stub)
        await worker.subscribe([ns], credit=1)
        # A quiet stream while the client pings: with grpc's defaults the server permits one every
        # 5 minutes, and its third early one gets GOAWAY `too_many_pings`, ending the stream.
        await asyncio.sleep(6)
        await stub.Accept(accept_request(ns, "k"))
        [event] = await worker.pushed(1)
        assert (await worker.complete(event)).WhichOneof("result") == "complete"
        assert await worker.close() == grpc.StatusCode.OK


async def test_a_heartbeat_never_shortens_the_lease_a_push_granted(
    clocked: RunningServer, short_clock: FakeClock, ns: str
) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{clocked.port}") as chan:
        stub = InboxServiceStub(chan)
        worker = Worker(stub)
        await worker.subscribe([ns], credit=1, lease=3)
        short_clock.advance(2)  # the worker says nothing meanwhile; then an event is pushed, leased for 3 s
        await stub.Accept(accept_request(ns, "k"))
        [event] = await worker.pushed(1)
        short_clock.advance(0.5)
        # A lease past its last word would end 0.5 s from now: the push's own lease is longer, and stays.
        await clocked.inbox.streams.renew_all()
        short_clock.advance(2)
        taken = await stub.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], worker_id="taker"))
        assert list(taken.events) == []
        assert (await worker.complete(event)).WhichOneof("result") == "complete"
        assert await worker.close() == grpc.StatusCode.OK
