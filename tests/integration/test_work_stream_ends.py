"""The Work stream is the heartbeat: leases live while it does, and its claims end the moment it ends.

However it ends (a cancel, a SIGKILLed worker, a connection cut by the
network, a stopping server), what it held is claimable again at once, as an
expired lease would make it, not a lease later. Time is the `clock` fixture.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from pathlib import Path

import grpc
import pytest

from inboxd.config.settings import Settings
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Connection, Database
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.client.tcp_proxy import TcpProxy
from tests.conftest import CLOCKED_SETTINGS, NO_RESCUER, FakeClock
from tests.harness import eventually
from tests.integration.helpers import TableLocked, accept_request, read_event, seconds
from tests.integration.work_streams import Worker, fence_of

HOLDER = Path(__file__).with_name("work_stream_holder.py")


async def state_of(db: Database, ns: str, key: str) -> str:
    return str((await read_event(db, ns, key))["state"])


async def test_the_stream_keeps_its_leases_alive_past_their_first_expiry(
    work: InboxServiceStub, clocked_server: RunningServer, clock: FakeClock, ns: str
) -> None:
    await work.Accept(accept_request(ns, "k"))
    worker = Worker(work)
    await worker.subscribe([ns], credit=1, lease=30)
    [event] = await worker.pushed(1)
    clock.advance(40)
    await clocked_server.inbox.streams.renew_all()
    # Past the lease it was pushed with, and not reclaimable: the heartbeat moved it.
    taken = await work.Claim(inbox_pb2.ClaimRequest(namespaces=[ns]))
    assert list(taken.events) == []
    assert (await worker.complete(event)).WhichOneof("result") == "complete"
    assert await worker.close() == grpc.StatusCode.OK


async def test_a_claim_completed_elsewhere_drops_out_of_the_streams_heartbeat(
    work: InboxServiceStub, clocked_server: RunningServer, ns: str
) -> None:
    await work.Accept(accept_request(ns, "k"))
    worker = Worker(work)
    await worker.subscribe([ns], credit=1, worker_id="drops")
    [event] = await worker.pushed(1)
    [mine] = [s for s in clocked_server.inbox.streams.live() if s.worker_id == "drops"]
    assert mine.held == 1
    await work.Complete(inbox_pb2.CompleteRequest(**fence_of(event)))
    await clocked_server.inbox.streams.renew_all()
    [mine] = [s for s in clocked_server.inbox.streams.live() if s.worker_id == "drops"]
    assert mine.held == 0
    assert await worker.close() == grpc.StatusCode.OK


async def test_a_cancelled_stream_ends_its_claims_at_once_and_another_worker_claims_them(
    work: InboxServiceStub, clocked_server: RunningServer, db: Database, ns: str
) -> None:
    metrics = clocked_server.ops.metrics if clocked_server.ops else None
    assert metrics is not None
    ended_before = metrics.work_events_ended._value.get()
    for key in ("a", "b"):
        await work.Accept(accept_request(ns, key))
    worker = Worker(work)
    await worker.subscribe([ns], credit=2)
    await worker.pushed(2)
    worker.call.cancel()
    await eventually(lambda: _all_in(db, ns, ("a", "b"), "pending"), "the held claims to end")
    row = await read_event(db, ns, "a")
    assert (row["attempt"], row["claim_token"]) == (1, None)
    assert "the worker's Work stream ended while it held the event" in row["last_error"]
    # Claimable at once by a unary Claim, the attempt counted.
    again = await work.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], max_events=10))
    assert sorted((e.event_key, e.attempt) for e in again.events) == [("a", 2), ("b", 2)]
    assert metrics.work_events_ended._value.get() == ended_before + 2


async def _all_in(db: Database, ns: str, keys: tuple[str, ...], state: str) -> bool:
    return all([await state_of(db, ns, key) == state for key in keys])


async def test_a_stream_ending_on_the_last_attempt_dead_letters_what_it_held(
    work: InboxServiceStub, db: Database, ns: str
) -> None:
    await work.Accept(accept_request(ns, "k"))
    worker = Worker(work)
    await worker.subscribe([ns], credit=CLOCKED_SETTINGS.max_attempts)
    for _ in range(CLOCKED_SETTINGS.max_attempts - 1):
        [event] = await worker.pushed(1)
        await worker.ask(fail=inbox_pb2.FailRequest(**fence_of(event), error="again", retry_after=seconds(0)))
    [last] = await worker.pushed(1)
    assert last.attempt == CLOCKED_SETTINGS.max_attempts
    worker.call.cancel()
    await eventually(lambda: _all_in(db, ns, ("k",), "dead_lettered"), "the last attempt to dead-letter")
    row = await read_event(db, ns, "k")
    assert "attempts exhausted" in row["last_error"] and "Work stream ended" in row["last_error"]


async def test_a_stream_gone_while_its_claim_runs_hands_the_claimed_events_back_uncounted(
    work: InboxServiceStub, clocked_server: RunningServer, db: Database, ns: str
) -> None:
    await work.Accept(accept_request(ns, "k"))
    async with TableLocked(db):
        worker = Worker(work)
        await worker.subscribe([ns], credit=1, worker_id=ns)
        await eventually(lambda: _claim_waiting_on_a_lock(db), "the stream's claim to wait on the table")
        worker.call.cancel()
        await eventually(lambda: ns not in _workers(clocked_server), "the server to see the stream gone")
    await eventually(lambda: _released(db, ns), "the orphaned claim to be handed back")


def _workers(server: RunningServer) -> list[str]:
    return [stream.worker_id for stream in server.inbox.streams.live()]


async def _released(db: Database, ns: str) -> bool:
    row = await read_event(db, ns, "k")
    return (row["state"], row["attempt"]) == ("pending", 0)


async def _claim_waiting_on_a_lock(db: Database) -> bool:
    async def work(conn: Connection) -> bool:
        cur = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '-- inboxd: event_claim%%'"
            " AND wait_event_type = 'Lock'"
        )
        row = await cur.fetchone()
        return row is not None and row[0] > 0

    return bool(await db.run(work))


async def test_a_sigkilled_workers_events_are_claimed_by_another_within_a_second(
    work: InboxServiceStub, clocked_server: RunningServer, db: Database, ns: str
) -> None:
    for key in ("a", "b", "c"):
        await work.Accept(accept_request(ns, key))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(HOLDER), f"127.0.0.1:{clocked_server.port}", ns, "3",
        stdout=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        while (line := (await asyncio.wait_for(proc.stdout.readline(), 30)).decode().strip()) != "holding":
            assert line.startswith("held "), f"unexpected output: {line!r}"
        proc.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    taken: list[str] = []
    for _ in range(3):  # a few long polls, each woken by the stream's end, not one per event
        answer = await work.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], max_events=10, wait=seconds(3)))
        taken += [e.event_key for e in answer.events]
        if len(taken) == 3:
            break
    assert sorted(taken) == ["a", "b", "c"]
    # Not a lease (30 s) later: about a second, with room for a loaded machine.
    assert time.monotonic() - killed < 3.0


async def test_a_connection_cut_under_a_live_worker_ends_its_claims_and_fences_its_later_writes(
    clocked_server: RunningServer, work: InboxServiceStub, db: Database, ns: str
) -> None:
    await work.Accept(accept_request(ns, "k"))
    proxy = await TcpProxy(clocked_server.port).start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{proxy.port}") as channel:
            stub = InboxServiceStub(channel)
            worker = Worker(stub)
            await worker.subscribe([ns], credit=1)
            [event] = await worker.pushed(1)
            proxy.cut()
            await eventually(lambda: _all_in(db, ns, ("k",), "pending"), "the cut stream's claim to end")
            proxy.mend()
            # The worker is alive and finishes its work: its token is dead.
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.Complete(inbox_pb2.CompleteRequest(**fence_of(event)), wait_for_ready=True)
            assert caught.value.code() == grpc.StatusCode.ABORTED
    finally:
        await proxy.stop()
    assert await state_of(db, ns, "k") == "pending"


async def test_a_stopping_server_pushes_no_more_and_ends_each_stream_once_its_worker_settled(
    db: Database, ns: str
) -> None:
    running = await start_server(Settings(listen="127.0.0.1:0", rescue_interval=NO_RESCUER), db)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        stub = InboxServiceStub(channel)
        for key in ("a", "b", "late"):
            await stub.Accept(accept_request(ns, key))
        worker = Worker(stub)
        await worker.subscribe([ns], credit=2)
        a, b = await worker.pushed(2)
        stopping = asyncio.ensure_future(running.stop(30.0))
        await eventually(lambda: running.inbox.streams.draining, "the server to begin its stop")
        await worker.credit(5)
        assert (await worker.complete(a)).WhichOneof("result") == "complete"
        assert (await worker.ask(release=inbox_pb2.ReleaseRequest(**fence_of(b)))).WhichOneof("result") == "release"
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await worker.read()
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "shutting down" in (caught.value.details() or "")
        # Told once, with the grace left.
        [told] = worker.draining
        assert 20 < told.grace.seconds <= 30
        # Well within the grace: the stream ended when the worker had settled.
        await asyncio.wait_for(stopping, 10)
    # The credit given while draining pushed nothing.
    assert worker.events == [a, b]
    assert await state_of(db, ns, "late") == "pending"
