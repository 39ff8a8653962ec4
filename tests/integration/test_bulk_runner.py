"""The bulk runner: the rate held over a whole run, due times at the pace, waiting Claims woken, failures, metrics."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import grpc

from inboxd.background.bulk_runner import BulkRunner
from inboxd.serving.server import RunningServer
from inboxd.store.database import Database
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.admin_pb2_grpc import InboxAdminServiceStub
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.integration.bulk_fixtures import DONE, FAILED, audit_rows, carry, dead_letters, get, start
from tests.integration.helpers import seconds
from tests.integration.procs import poll

# About two seconds of run: long enough to measure a pace, short enough for the suite.
EVENTS, RATE = 40, 20.0


async def _due_times(db: Database, ns: str) -> list[float]:
    async def read(conn: Any) -> list[float]:
        cur = await conn.execute(
            "SELECT extract(epoch FROM due_at) FROM inbox_events WHERE namespace = %s ORDER BY due_at", (ns,)
        )
        return [float(row[0]) for row in await cur.fetchall()]

    found: list[float] = await db.run(read)
    return found


async def test_an_operation_at_a_rate_takes_its_time_and_its_events_come_due_at_the_pace(
    server: RunningServer, inbox: InboxServiceStub, admin: InboxAdminServiceStub, db: Database, ns: str
) -> None:
    await dead_letters(inbox, ns, EVENTS)
    assert server.ops is not None and server.ops.duties is not None
    metrics = server.ops.duties.metrics
    registry = server.ops.metrics.registry
    changed_before = registry.get_sample_value("inboxd_bulk_events_changed_total", {"action": "replay"}) or 0.0
    started = await start(admin, ns, rate=RATE)
    runner = BulkRunner(server.ops.operators, metrics, poll_seconds=0)
    began = time.monotonic()
    carrying = asyncio.create_task(runner.carry(uuid.UUID(started.operation.id)))
    await poll(lambda: _running_gauge(registry), within=10, interval=0.02)
    await carrying
    took = time.monotonic() - began

    ended = await get(admin, started.operation.id)
    assert (ended.state, ended.done) == (DONE, EVENTS)
    run = ended.finished_at.ToDatetime() - ended.started_at.ToDatetime()
    target = EVENTS / RATE
    # Held within the issue's ±15% over the whole run; never faster than the rate allows.
    assert target * 0.85 <= run.total_seconds() <= target * 1.15 + 0.3, run
    assert took >= target * 0.85
    assert abs(ended.measured_rate - RATE) <= RATE * 0.15 + 1, ended.measured_rate
    # Claimable at the pace, not all at once: due times spread over the run, no quarter second holding
    # more than its share (a chunk's worth) and one more.
    due = await _due_times(db, ns)
    assert len(due) == EVENTS
    assert (EVENTS - 1) / RATE * 0.85 <= due[-1] - due[0] <= target * 1.15
    per_quarter = int(RATE / 4)
    assert all(sum(1 for d in due if t <= d < t + 0.25) <= per_quarter + 1 for t in due)
    changed = registry.get_sample_value("inboxd_bulk_events_changed_total", {"action": "replay"})
    assert changed == changed_before + EVENTS
    assert registry.get_sample_value("inboxd_bulk_operations_running") == 0


async def _running_gauge(registry: Any) -> bool | None:
    return True if registry.get_sample_value("inboxd_bulk_operations_running") == 1 else None


async def test_waiting_claims_are_woken_for_replayed_events_each_at_its_turn(
    quiet_server: RunningServer, inbox: InboxServiceStub, admin: InboxAdminServiceStub, ns: str
) -> None:
    """A server with no fallback poll: a waiting Claim that gets an event was woken for it."""
    await dead_letters(inbox, ns, 2)
    # Two events in one chunk, the second due an eighth of a second after the first.
    started = await start(admin, ns, rate=8.0)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{quiet_server.port}") as chan:
        quiet = InboxServiceStub(chan)

        async def claim() -> inbox_pb2.ClaimResponse:
            answer: inbox_pb2.ClaimResponse = await quiet.Claim(
                inbox_pb2.ClaimRequest(namespaces=[ns], wait=seconds(20)), timeout=30
            )
            return answer

        waiting = [asyncio.create_task(claim()) for _ in range(2)]
        await asyncio.sleep(0.2)  # the Claims are waiting (nothing is claimable yet)
        began = time.monotonic()
        await carry(quiet_server, started.operation.id)
        answers = await asyncio.gather(*waiting)
    assert sorted(len(a.events) for a in answers) == [1, 1]
    assert time.monotonic() - began < 5


async def test_a_chunk_that_fails_for_good_ends_the_operation_failed_with_its_error_and_changes_nothing(
    server: RunningServer, inbox: InboxServiceStub, admin: InboxAdminServiceStub, db: Database, ns: str
) -> None:
    await dead_letters(inbox, ns, 3)
    started = await start(admin, ns)
    # A fault of the database's own (a trigger refusing the audit row), not an outage: retrying will not mend it.
    name = f"refuse_{uuid.uuid4().hex[:8]}"
    await _ddl(
        db,
        f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        f" IF NEW.namespace = '{ns}' THEN RAISE EXCEPTION 'audit refused'; END IF; RETURN NEW; END $$",
        f"CREATE TRIGGER {name} BEFORE INSERT ON inbox_replays FOR EACH ROW EXECUTE FUNCTION {name}()",
    )
    try:
        await carry(server, started.operation.id)
    finally:
        await _ddl(db, f"DROP TRIGGER {name} ON inbox_replays", f"DROP FUNCTION {name}()")
    ended = await get(admin, started.operation.id)
    assert ended.state == FAILED and "audit refused" in ended.error
    assert (ended.done, ended.skipped) == (0, 0)
    assert await audit_rows(db, started.operation.id) == []


async def _ddl(db: Database, *statements: str) -> None:
    async def run(conn: Any) -> None:
        for statement in statements:
            await conn.execute(statement)

    await db.run(run, transaction=False)
