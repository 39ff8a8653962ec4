"""Retention: COMPLETED rows are forgotten after the retention, their payloads earlier; nothing else is.

The server here has a clock of its own, and each pass is confined to the
test's namespace, so a pass far in the future touches no other test's rows.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import datetime, timedelta

import grpc
import psycopg
import pytest

from inboxd.background.retention import retention_loop, run_retention_pass
from inboxd.domain.operator_views import RetentionCounts
from inboxd.observability.transition_observer import InboxObserver
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd.store.retention import RETENTION_LOCK, apply_retention
from inboxd_client.v1 import admin_pb2, admin_pb2_grpc, inbox_pb2, inbox_pb2_grpc, types_pb2
from tests.conftest import CLOCKED_SETTINGS, FakeClock
from tests.integration.helpers import accept_request, expect_status
from tests.integration.test_claims import claim_one, fenced

DAY = timedelta(days=1)
SETTINGS = replace(CLOCKED_SETTINGS, retention=7 * DAY, payload_retention=DAY)
ACCEPTED = inbox_pb2.ACCEPT_OUTCOME_ACCEPTED
DUPLICATE = inbox_pb2.ACCEPT_OUTCOME_DUPLICATE


@pytest.fixture(scope="module")
def own_clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(scope="module")
async def kept(db: Database, own_clock: FakeClock) -> AsyncIterator[RunningServer]:
    # Its own retention loop would run unconfined, but only after 60 s: beyond this module's life.
    running = await start_server(SETTINGS, db, clock=own_clock)
    yield running
    await running.stop(1.0)


@pytest.fixture(scope="module")
async def channel(kept: RunningServer) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{kept.port}") as chan:
        yield chan


@pytest.fixture
def work(channel: grpc.aio.Channel) -> inbox_pb2_grpc.InboxServiceStub:
    return inbox_pb2_grpc.InboxServiceStub(channel)


@pytest.fixture
def admin(channel: grpc.aio.Channel) -> admin_pb2_grpc.InboxAdminServiceStub:
    return admin_pb2_grpc.InboxAdminServiceStub(channel)


async def retention_at(db: Database, ns: str, now: datetime, **overrides: object) -> RetentionCounts:
    """One pass as of `now` over `ns`; retried while another server's background pass holds the lock."""
    settings = replace(SETTINGS, **overrides)  # type: ignore[arg-type]
    for _ in range(100):  # bounded: background passes take milliseconds
        counts = await run_retention_pass(db.conninfo, settings, now=now, namespace=ns)
        if counts is not None:
            return counts
        await asyncio.sleep(0.05)
    raise AssertionError("the retention lock stayed taken")


async def complete(work: inbox_pb2_grpc.InboxServiceStub, ns: str, key: str) -> inbox_pb2.ClaimedEvent:
    await work.Accept(accept_request(ns, key))
    event = await claim_one(work, ns)
    assert event.event_key == key
    await work.Complete(inbox_pb2.CompleteRequest(**fenced(event)))
    return event


async def states(admin: admin_pb2_grpc.InboxAdminServiceStub, ns: str) -> dict[str, int]:
    page = await admin.ListEvents(admin_pb2.ListEventsRequest(namespace=ns))
    return {e.event_key: e.state for e in page.events}


async def test_only_completed_rows_past_the_retention_are_deleted(
    work: inbox_pb2_grpc.InboxServiceStub,
    admin: admin_pb2_grpc.InboxAdminServiceStub,
    db: Database,
    ns: str,
    own_clock: FakeClock,
) -> None:
    start = own_clock.now
    await complete(work, ns, "done-early")
    await work.Accept(accept_request(ns, "dead"))
    dead = await claim_one(work, ns)
    await work.Fail(inbox_pb2.FailRequest(**fenced(dead), error="x", permanent=True))
    own_clock.advance(3 * 86400)
    await complete(work, ns, "done-late")
    await work.Accept(accept_request(ns, "processing"))
    await claim_one(work, ns)
    await work.Accept(accept_request(ns, "pending"))

    assert (await retention_at(db, ns, start + 7 * DAY - timedelta(seconds=1))).rows_deleted == 0
    counts = await retention_at(db, ns, start + 7 * DAY + timedelta(seconds=1))
    assert counts.rows_deleted == 1
    left = await states(admin, ns)
    assert set(left) == {"dead", "processing", "done-late", "pending"}
    # A hundred days on, every COMPLETED row is gone and nothing else is.
    assert (await retention_at(db, ns, start + 100 * DAY)).rows_deleted == 1
    assert await states(admin, ns) == {
        "dead": types_pb2.EVENT_STATE_DEAD_LETTERED,
        "processing": types_pb2.EVENT_STATE_PROCESSING,
        "pending": types_pb2.EVENT_STATE_PENDING,
    }


async def test_a_repeat_is_a_duplicate_before_expiry_and_a_new_event_after(
    work: inbox_pb2_grpc.InboxServiceStub,
    admin: admin_pb2_grpc.InboxAdminServiceStub,
    db: Database,
    ns: str,
    own_clock: FakeClock,
) -> None:
    completed_at = own_clock.now
    await complete(work, ns, "k")
    await retention_at(db, ns, completed_at + 6 * DAY, payload_retention=None)
    assert (await work.Accept(accept_request(ns, "k"))).outcome == DUPLICATE
    await retention_at(db, ns, completed_at + 8 * DAY, payload_retention=None)
    again = await work.Accept(accept_request(ns, "k"))
    assert (again.outcome, again.state) == (ACCEPTED, types_pb2.EVENT_STATE_PENDING)
    fresh = (await admin.GetEvent(admin_pb2.GetEventRequest(namespace=ns, event_key="k"))).event
    assert (list(fresh.claims), list(fresh.actions)) == ([], [])  # a new event: no history carried over


async def test_payload_retention_drops_payloads_and_keeps_key_state_and_actions(
    work: inbox_pb2_grpc.InboxServiceStub,
    admin: admin_pb2_grpc.InboxAdminServiceStub,
    db: Database,
    ns: str,
    own_clock: FakeClock,
) -> None:
    completed_at = own_clock.now
    await work.Accept(accept_request(ns, "k", {"email": "a@example.com"}))
    await work.Accept(accept_request(ns, "k", {"email": "b@example.com"}))  # a conflicting copy
    event = await claim_one(work, ns)
    await work.RecordActionOutcome(
        inbox_pb2.RecordActionOutcomeRequest(**fenced(event), action="mail", state=types_pb2.ACTION_STATE_SUCCEEDED)
    )
    await work.Complete(inbox_pb2.CompleteRequest(**fenced(event)))
    await work.Accept(accept_request(ns, "open"))

    assert (await retention_at(db, ns, completed_at + DAY - timedelta(seconds=1))).payloads_dropped == 0
    counts = await retention_at(db, ns, completed_at + 2 * DAY)
    assert (counts.payloads_dropped, counts.rows_deleted) == (1, 0)
    asked = admin_pb2.GetEventRequest(namespace=ns, event_key="k", include_conflict_payloads=True)
    record = (await admin.GetEvent(asked)).event
    assert record.payload == b""
    assert [c.payload for c in record.conflicts] == [b""]
    assert record.summary.state == types_pb2.EVENT_STATE_COMPLETED
    assert [a.action for a in record.actions] == ["mail"]
    open_event = (await admin.GetEvent(admin_pb2.GetEventRequest(namespace=ns, event_key="open"))).event
    assert open_event.payload  # a PENDING row keeps its payload
    # The key still dedupes; with nothing left to process, Replay is refused.
    assert (await work.Accept(accept_request(ns, "k", {"email": "a@example.com"}))).outcome == DUPLICATE
    await expect_status(
        admin.Replay(admin_pb2.ReplayRequest(namespace=ns, event_key="k", reason="r")),
        grpc.StatusCode.FAILED_PRECONDITION,
    )


async def test_a_conflicting_copy_that_arrives_after_the_payload_was_dropped_loses_its_payload_too(
    work: inbox_pb2_grpc.InboxServiceStub,
    admin: admin_pb2_grpc.InboxAdminServiceStub,
    db: Database,
    ns: str,
    own_clock: FakeClock,
) -> None:
    completed_at = own_clock.now
    await work.Accept(accept_request(ns, "k", {"email": "a@example.com"}))
    event = await claim_one(work, ns)
    await work.Complete(inbox_pb2.CompleteRequest(**fenced(event)))
    assert (await retention_at(db, ns, completed_at + 2 * DAY)).payloads_dropped == 1
    # A copy after the drop: with the payload gone only the type can differ, so it does.
    late = await work.Accept(accept_request(ns, "k", {"email": "late@example.com"}, event_type="test.other"))
    assert late.outcome == inbox_pb2.ACCEPT_OUTCOME_CONFLICT

    def copies(record: admin_pb2.Event) -> list[bytes]:
        return [c.payload for c in record.conflicts]

    asked = admin_pb2.GetEventRequest(namespace=ns, event_key="k", include_conflict_payloads=True)
    record = (await admin.GetEvent(asked)).event
    assert len(copies(record)) == 1 and copies(record)[0], "the late copy is recorded with its payload"
    await retention_at(db, ns, completed_at + 3 * DAY)
    record = (await admin.GetEvent(asked)).event
    assert copies(record) == [b""], "retention must revisit a copy that arrived after its event's payload went"


async def test_retention_runs_in_bounded_batches(
    work: inbox_pb2_grpc.InboxServiceStub,
    admin: admin_pb2_grpc.InboxAdminServiceStub,
    db: Database,
    ns: str,
    own_clock: FakeClock,
) -> None:
    for i in range(5):
        await complete(work, ns, f"e{i}")
    counts = await apply_retention(
        db.conninfo, retention=DAY, payload_retention=None, now=own_clock.now + 365 * DAY, batch_size=2, namespace=ns
    )
    assert counts is not None and counts.rows_deleted == 5
    assert await states(admin, ns) == {}


async def test_only_one_replica_runs_a_pass_at_a_time(
    work: inbox_pb2_grpc.InboxServiceStub, db: Database, ns: str, own_clock: FakeClock
) -> None:
    await complete(work, ns, "k")
    far = own_clock.now + 30 * DAY
    async with await psycopg.AsyncConnection.connect(db.conninfo, autocommit=True) as other_replica:
        await other_replica.execute("SELECT pg_advisory_lock(%s)", (RETENTION_LOCK,))
        assert await run_retention_pass(db.conninfo, SETTINGS, now=far, namespace=ns) is None
        await other_replica.execute("SELECT pg_advisory_unlock(%s)", (RETENTION_LOCK,))
    assert (await retention_at(db, ns, far)).rows_deleted == 1


async def test_the_background_loop_keeps_running_passes(db: Database) -> None:
    passes: list[RetentionCounts] = []

    class Heard(InboxObserver):
        def retention_ran(self, counts: RetentionCounts) -> None:
            passes.append(counts)

    # The database's own clock and a week's retention: nothing this young is touched.
    quiet = replace(SETTINGS, payload_retention=None)
    loop = asyncio.ensure_future(retention_loop(db.conninfo, quiet, lambda: None, Heard(), interval=0.01))
    try:
        for _ in range(500):  # bounded: until two passes have run
            if len(passes) >= 2:
                break
            await asyncio.sleep(0.01)
    finally:
        loop.cancel()
    assert len(passes) >= 2
