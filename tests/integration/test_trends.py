"""The console's trends: each process's minute tally in one statement, summed on read; the ages; the window.

Two servers on one database stand for two processes (or replicas). Writes
and passes run by hand on a clock of the module's own, set far from the other
tests' clocks, so a minute here holds only this module's rows: no sleeping.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import grpc
import pytest

from inboxd.background.rescuer import run_rescue_pass
from inboxd.background.trends import record_ages, write_tally
from inboxd.domain.trends import TRENDS_WINDOW
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import CLOCKED_SETTINGS, FakeClock
from tests.integration.helpers import accept_request, seconds
from tests.integration.test_claims import claim_one, fenced
from tests.integration.work_streams import Worker

# Every namespace of the database may be among the ages: none is left out by the cap here.
SETTINGS = replace(CLOCKED_SETTINGS, metrics_max_namespaces=100_000)


@dataclass
class Process:
    running: RunningServer
    stub: InboxServiceStub


@pytest.fixture(scope="module")
def trend_clock() -> FakeClock:
    clock = FakeClock()
    clock.advance(400 * 86_400)
    clock.now = clock.now.replace(second=5)
    return clock


@pytest.fixture(scope="module")
async def processes(db: Database, trend_clock: FakeClock) -> AsyncIterator[tuple[Process, Process]]:
    started = [await start_server(SETTINGS, db, clock=trend_clock) for _ in range(2)]
    channels = [grpc.aio.insecure_channel(f"127.0.0.1:{r.port}") for r in started]
    yield Process(started[0], InboxServiceStub(channels[0])), Process(started[1], InboxServiceStub(channels[1]))
    for channel in channels:
        await channel.close(None)
    for running in started:
        await running.stop(1.0)


def namespace() -> str:
    return f"trend/{uuid.uuid4().hex[:12]}"


async def write(process: Process) -> bool:
    ops = process.running.ops
    assert ops is not None
    return await write_tally(process.running.inbox, ops.trends)


async def rows(db: Database, *namespaces: str) -> list[tuple[Any, ...]]:
    async def work(conn: Any) -> list[tuple[Any, ...]]:
        cur = await conn.execute(
            "SELECT namespace, minute, accepted, completed, dead_lettered FROM inbox_trend_counts"
            " WHERE namespace = ANY(%s) ORDER BY namespace, minute",
            (list(namespaces),),
        )
        return list(await cur.fetchall())

    found: list[tuple[Any, ...]] = await db.run(work)
    return found


async def record_ages_by_hand(process: Process) -> None:
    """One ages pass; the session's other servers run theirs too, so wait out one that holds the lock."""
    ops = process.running.ops
    assert ops is not None
    for _ in range(100):
        if await record_ages(ops.operators):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("another replica held the trends lock for 5 s")


def minute(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0)


async def test_a_minutes_counts_of_every_namespace_are_written_in_one_statement(
    processes: tuple[Process, Process], db: Database, trend_clock: FakeClock
) -> None:
    a, _ = processes
    shop, other = namespace(), namespace()
    for key in ("k1", "k2", "k3"):
        await a.stub.Accept(accept_request(shop, key))
    await a.stub.Accept(accept_request(shop, "k1"))  # a duplicate is no new event
    await a.stub.Accept(accept_request(other, "k1"))
    done = await claim_one(a.stub, shop)
    await a.stub.Complete(inbox_pb2.CompleteRequest(**fenced(done)))
    poison = await claim_one(a.stub, shop)
    await a.stub.Fail(inbox_pb2.FailRequest(**fenced(poison), error="bad", permanent=True))

    assert await write(a)

    at = minute(trend_clock.now)
    # One row each, from the one INSERT: the minute's tally of every namespace this process counted.
    assert sorted(await rows(db, shop, other)) == sorted([(other, at, 1, 0, 0), (shop, at, 3, 1, 1)])
    ops = a.running.ops
    assert ops is not None
    [trend] = await ops.operators.trends([shop])
    assert trend.minutes[-1] == at and len(trend.minutes) == TRENDS_WINDOW.total_seconds() // 60
    assert (trend.accepted[-1], trend.completed[-1], trend.dead_lettered[-1]) == (3, 1, 1)
    assert sum(trend.accepted[:-1]) == 0


async def spend_attempts(process: Process, ns: str, clock: FakeClock, attempts: int) -> None:
    """Claims the namespace's one event `attempts` times, each lease left to run out."""
    for _ in range(attempts):
        await claim_one(process.stub, ns, lease=seconds(1))
        clock.advance(2)


async def test_dead_letters_of_a_claim_the_rescuer_and_a_streams_end_count_in_their_namespace(
    processes: tuple[Process, Process], db: Database, trend_clock: FakeClock
) -> None:
    a, _ = processes
    by_claim, by_rescuer, by_stream = namespace(), namespace(), namespace()
    for ns in (by_claim, by_rescuer, by_stream):
        await a.stub.Accept(accept_request(ns, "poison"))
    # A Claim meets the event with its attempts spent and its last lease expired.
    await spend_attempts(a, by_claim, trend_clock, SETTINGS.max_attempts)
    answer = await a.stub.Claim(inbox_pb2.ClaimRequest(namespaces=[by_claim]))
    assert list(answer.events) == []
    # The rescuer ends the last attempt's lease.
    await spend_attempts(a, by_rescuer, trend_clock, SETTINGS.max_attempts)
    rescued = await run_rescue_pass(
        a.running.inbox, now=trend_clock.now + SETTINGS.rescue_grace + timedelta(seconds=1), namespace=by_rescuer
    )
    assert rescued is not None and len(rescued) == 1
    # A Work stream pushed the last attempt and ended holding it.
    await spend_attempts(a, by_stream, trend_clock, SETTINGS.max_attempts - 1)
    worker = Worker(a.stub)
    await worker.subscribe([by_stream], credit=1)
    [last] = await worker.pushed(1)
    assert last.attempt == SETTINGS.max_attempts
    assert await worker.close() == grpc.StatusCode.OK
    await a.running.inbox.streams.closed()

    assert await write(a)
    found = await rows(db, by_claim, by_rescuer, by_stream)
    dead = {ns: sum(row[4] for row in found if row[0] == ns) for ns in (by_claim, by_rescuer, by_stream)}
    assert dead == {by_claim: 1, by_rescuer: 1, by_stream: 1}, found


async def test_two_processes_counts_of_one_minute_are_summed_on_read(
    processes: tuple[Process, Process], db: Database
) -> None:
    a, b = processes
    shop = namespace()
    for key in ("a1", "a2"):
        await a.stub.Accept(accept_request(shop, key))
    for key in ("b1", "b2", "b3"):
        await b.stub.Accept(accept_request(shop, key))
    assert await write(a) and await write(b)
    assert len(await rows(db, shop)) == 2, "one row per process"
    ops = a.running.ops
    assert ops is not None
    [trend] = await ops.operators.trends([shop])
    assert trend.accepted[-1] == 5


async def test_an_idle_process_writes_nothing(processes: tuple[Process, Process], db: Database) -> None:
    a, b = processes
    shop = namespace()
    await a.stub.Accept(accept_request(shop, "k"))
    await write(b)  # whatever it held from before
    assert await write(a)
    assert not await write(a), "nothing counted since the last write"
    assert not await write(b)
    assert len(await rows(db, shop)) == 1


async def test_the_oldest_claimable_age_is_recorded_once_a_minute(
    processes: tuple[Process, Process], trend_clock: FakeClock
) -> None:
    a, _ = processes
    shop = namespace()
    await a.stub.Accept(accept_request(shop, "waits"))
    trend_clock.advance(120)
    await record_ages_by_hand(a)
    trend_clock.advance(60)
    await record_ages_by_hand(a)
    ops = a.running.ops
    assert ops is not None
    [trend] = await ops.operators.trends([shop])
    assert trend.oldest_claimable[-2:] == (120.0, 180.0)
    assert set(trend.oldest_claimable[:-2]) == {None}
    # Claimed, it waits no more: the next minute says 0 (the namespace still has events).
    await claim_one(a.stub, shop)
    trend_clock.advance(60)
    await record_ages_by_hand(a)
    [trend] = await ops.operators.trends([shop])
    assert trend.oldest_claimable[-3:] == (120.0, 180.0, 0.0)


async def test_minutes_older_than_the_window_are_forgotten(
    processes: tuple[Process, Process], db: Database, trend_clock: FakeClock
) -> None:
    a, _ = processes
    shop = namespace()
    await a.stub.Accept(accept_request(shop, "k"))
    assert await write(a)
    trend_clock.advance(60)
    await record_ages_by_hand(a)
    written = minute(trend_clock.now) - timedelta(minutes=1)
    trend_clock.advance(TRENDS_WINDOW.total_seconds() - 120)
    await record_ages_by_hand(a)
    assert [r[1] for r in await rows(db, shop)] == [written], "still inside the window"
    trend_clock.advance(120)
    await record_ages_by_hand(a)
    assert await rows(db, shop) == []
    ops = a.running.ops
    assert ops is not None
    [trend] = await ops.operators.trends([shop])
    assert sum(trend.accepted) == 0
    assert trend.oldest_claimable[-1] is not None
    assert await age_minutes(db, shop) == [
        minute(trend_clock.now) - timedelta(minutes=2),
        minute(trend_clock.now),
    ]


async def age_minutes(db: Database, ns: str) -> list[datetime]:
    async def work(conn: Any) -> list[datetime]:
        cur = await conn.execute("SELECT minute FROM inbox_trend_ages WHERE namespace = %s ORDER BY minute", (ns,))
        return [r[0] for r in await cur.fetchall()]

    found: list[datetime] = await db.run(work)
    return found


async def test_a_graceful_stop_writes_the_last_minutes_counts(db: Database, trend_clock: FakeClock) -> None:
    running = await start_server(SETTINGS, db, clock=trend_clock)
    shop = namespace()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        await InboxServiceStub(channel).Accept(accept_request(shop, "k"))
    await running.stop(1.0)
    assert [r[2] for r in await rows(db, shop)] == [1]
