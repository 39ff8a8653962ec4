"""A database outage: Accept answers UNAVAILABLE (never OK) and recovers by itself, losing nothing.

Each test runs inboxd in-process against a PostgreSQL of its own (durable: fsync and synchronous
commit on), stops or crashes that PostgreSQL, and starts it again on the same port.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from inboxd.config.settings import Settings
from inboxd.serving.embedded_pg import EmbeddedPostgres
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd.store.migrate import migrate
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import NO_RESCUER
from tests.harness import discard_postgres, throwaway_postgres
from tests.integration.helpers import accept_request, expect_status
from tests.integration.procs import poll, stored_keys

ACCEPTED = inbox_pb2.ACCEPT_OUTCOME_ACCEPTED
DUPLICATE = inbox_pb2.ACCEPT_OUTCOME_DUPLICATE
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
NS = "test/outage"
# Each call gets a deadline, so a call that hangs fails the test instead of stalling it.
CALL_DEADLINE = 20.0


@dataclass
class Rig:
    pg: EmbeddedPostgres
    db: Database
    server: RunningServer
    inbox: InboxServiceStub
    health: health_pb2_grpc.HealthStub


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    async with _rig(acquire_timeout=2.0) as built:
        yield built


@pytest.fixture
async def default_rig() -> AsyncIterator[Rig]:
    """As `inboxd serve` builds it: the pool's default acquire timeout (5 s)."""
    async with _rig() as built:
        yield built


@contextlib.asynccontextmanager
async def _rig(acquire_timeout: float | None = None) -> AsyncIterator[Rig]:
    pg = await asyncio.to_thread(throwaway_postgres, durable=True)
    try:
        await migrate(pg.conninfo)
        db = (
            Database(pg.conninfo) if acquire_timeout is None else Database(pg.conninfo, acquire_timeout=acquire_timeout)
        )
        await db.open()
        try:
            running = await start_server(Settings(listen="127.0.0.1:0", rescue_interval=NO_RESCUER), db)
            try:
                async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
                    yield Rig(pg, db, running, InboxServiceStub(channel), health_pb2_grpc.HealthStub(channel))
            finally:
                await running.stop(1.0)
        finally:
            await db.close()
    finally:
        await asyncio.to_thread(discard_postgres, pg)


async def health_is(rig: Rig, wanted: int) -> bool | None:
    answer = await rig.health.Check(health_pb2.HealthCheckRequest(service=""), timeout=CALL_DEADLINE)
    return True if answer.status == wanted else None


@pytest.mark.parametrize("outage", ["stop", "crash"])
async def test_accept_is_unavailable_while_postgres_is_down_and_recovers_without_a_restart(
    rig: Rig, outage: str
) -> None:
    before = [f"before-{i}" for i in range(25)]
    answers = await asyncio.gather(*(rig.inbox.Accept(accept_request(NS, k), timeout=CALL_DEADLINE) for k in before))
    assert [a.outcome for a in answers] == [ACCEPTED] * len(before)
    assert await health_is(rig, SERVING)

    # Down: a clean fast shutdown, or an immediate one that needs crash recovery on restart.
    await asyncio.to_thread(rig.pg.stop if outage == "stop" else rig.pg.kill)

    during = [f"during-{i}" for i in range(3)]
    for key in during:
        # expect_status fails the test on OK or on any other code.
        await expect_status(
            rig.inbox.Accept(accept_request(NS, key), timeout=CALL_DEADLINE), grpc.StatusCode.UNAVAILABLE
        )
    batch = inbox_pb2.AcceptBatchRequest(events=[accept_request(NS, "during-batch")])
    await expect_status(rig.inbox.AcceptBatch(batch, timeout=CALL_DEADLINE), grpc.StatusCode.UNAVAILABLE)
    await poll(lambda: health_is(rig, NOT_SERVING), within=30.0)

    await asyncio.to_thread(rig.pg.restart_stopped)

    async def accepted_again() -> inbox_pb2.AcceptResponse | None:
        try:
            answer: inbox_pb2.AcceptResponse = await rig.inbox.Accept(
                accept_request(NS, "after"), timeout=CALL_DEADLINE
            )
        except grpc.aio.AioRpcError as exc:
            # Until the pool has reconnected, UNAVAILABLE is the only honest answer.
            assert exc.code() == grpc.StatusCode.UNAVAILABLE, f"{exc.code()}: {exc.details()}"
            return None
        return answer

    first_after = await poll(accepted_again, within=30.0)
    assert first_after.outcome == ACCEPTED
    await poll(lambda: health_is(rig, SERVING), within=30.0)

    # Everything acknowledged before the outage is there; repeats of it are duplicates.
    assert set(before) <= await stored_keys(rig.db, NS)
    repeats = await asyncio.gather(*(rig.inbox.Accept(accept_request(NS, k), timeout=CALL_DEADLINE) for k in before))
    assert [a.outcome for a in repeats] == [DUPLICATE] * len(before)
    # Nothing could commit while PostgreSQL was down, so what was refused then is new now.
    for key in [*during, "during-batch"]:
        answer = await rig.inbox.Accept(accept_request(NS, key), timeout=CALL_DEADLINE)
        assert answer.outcome == ACCEPTED, key
    assert await stored_keys(rig.db, NS) == {*before, *during, "during-batch", "after"}


# A deadline, not a speed: well under the pool's 5 s acquire timeout, well over "about a second".
PROMPT_DEADLINE = 3.0


async def test_once_postgres_is_known_down_calls_are_refused_before_a_short_deadline(default_rig: Rig) -> None:
    rig = default_rig
    await rig.inbox.Accept(accept_request(NS, "before"), timeout=CALL_DEADLINE)
    await asyncio.to_thread(rig.pg.stop)
    # inboxd finds out (the first calls may wait for the pool; the health probe says when it knows).
    await poll(lambda: health_is(rig, NOT_SERVING), within=30.0)

    calls = [rig.inbox.Accept(accept_request(NS, f"during-{i}"), timeout=PROMPT_DEADLINE) for i in range(5)]
    batch = inbox_pb2.AcceptBatchRequest(events=[accept_request(NS, "during-batch")])
    calls.append(rig.inbox.AcceptBatch(batch, timeout=PROMPT_DEADLINE))
    # UNAVAILABLE, not DEADLINE_EXCEEDED: refused at once, not queued behind the pool's wait.
    await asyncio.gather(*(expect_status(call, grpc.StatusCode.UNAVAILABLE) for call in calls))

    await asyncio.to_thread(rig.pg.restart_stopped)

    async def accepted_again() -> inbox_pb2.AcceptResponse | None:
        try:
            answer: inbox_pb2.AcceptResponse = await rig.inbox.Accept(
                accept_request(NS, "after"), timeout=CALL_DEADLINE
            )
        except grpc.aio.AioRpcError as exc:
            assert exc.code() == grpc.StatusCode.UNAVAILABLE, f"{exc.code()}: {exc.details()}"
            return None
        return answer

    assert (await poll(accepted_again, within=30.0)).outcome == ACCEPTED
    await poll(lambda: health_is(rig, SERVING), within=30.0)
