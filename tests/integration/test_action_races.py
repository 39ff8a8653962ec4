"""The action ledger under takeovers: an older claim never undoes a newer one's record."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import psycopg
import pytest

from inboxd.domain.errors import ClaimSuperseded
from inboxd.domain.vocabulary import ActionState, ClaimToken, EventKey, Fence, Namespace
from inboxd.store.actions import action_history, record_action
from inboxd.store.database import Database
from inboxd_client.v1 import admin_pb2, inbox_pb2
from inboxd_client.v1.admin_pb2_grpc import InboxAdminServiceStub
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import FakeClock
from tests.harness import eventually
from tests.integration.helpers import expect_status, seconds
from tests.integration.test_actions import FAILED, INTENDED, SUCCEEDED, UNKNOWN, claimed, record
from tests.integration.test_claims import claim_one, fenced


async def taken_over(
    work: InboxServiceStub, ns: str, clock: FakeClock
) -> tuple[inbox_pb2.ClaimedEvent, inbox_pb2.ClaimedEvent]:
    """Claim A records INTENDED and stalls; its lease lapses and claim B takes the event over."""
    older = await claimed(work, ns)
    await record(work, older, INTENDED)
    clock.advance(31)
    newer = await claim_one(work, ns)
    assert newer.fencing_token > older.fencing_token
    return older, newer


async def test_a_superseded_claims_failure_does_not_undo_the_newer_claims_intent(
    work: InboxServiceStub, ns: str, clock: FakeClock
) -> None:
    older, newer = await taken_over(work, ns, clock)
    await record(work, newer, FAILED, detail="reconciled: not sent")
    intent = await record(work, newer, INTENDED)
    late = await record(work, older, FAILED, detail="the older attempt timed out")
    assert (late.state, late.fencing_token, late.detail) == (INTENDED, newer.fencing_token, "")
    done = await record(work, newer, SUCCEEDED, external_ref="msg_1")
    assert (done.state, done.fencing_token, done.idempotency_key) == (
        SUCCEEDED,
        newer.fencing_token,
        intent.idempotency_key,
    )


@pytest.mark.parametrize("late_state", [FAILED, UNKNOWN])
async def test_an_older_claims_outcome_after_the_newer_ones_success_answers_ok_with_the_success(
    work: InboxServiceStub, ns: str, clock: FakeClock, late_state: int
) -> None:
    older, newer = await taken_over(work, ns, clock)
    await record(work, newer, INTENDED)
    await record(work, newer, SUCCEEDED, external_ref="msg_2")
    late = await record(work, older, late_state)
    assert (late.state, late.external_ref, late.fencing_token) == (SUCCEEDED, "msg_2", newer.fencing_token)


async def test_an_older_claims_success_is_never_lost(work: InboxServiceStub, ns: str, clock: FakeClock) -> None:
    older, newer = await taken_over(work, ns, clock)
    await record(work, newer, INTENDED)
    await record(work, newer, FAILED, detail="provider said 503")
    late = await record(work, older, SUCCEEDED, external_ref="msg_3")
    assert (late.state, late.external_ref, late.fencing_token) == (SUCCEEDED, "msg_3", older.fencing_token)
    # The next claim finds the success and does not act again.
    await work.Fail(inbox_pb2.FailRequest(**fenced(newer), error="x", retry_after=seconds(0)))
    again = await claim_one(work, ns)
    assert [(a.state, a.external_ref) for a in again.actions] == [(SUCCEEDED, "msg_3")]
    await expect_status(record(work, again, INTENDED), grpc.StatusCode.FAILED_PRECONDITION)


async def test_intent_is_decided_under_the_lock_that_writes_it(
    work: InboxServiceStub, db: Database, ns: str, clock: FakeClock
) -> None:
    """A takeover that commits between the currency check and the write must not let the old claim intend."""
    older = await claimed(work, ns)
    await record(work, older, INTENDED)
    fence = Fence(Namespace(ns), EventKey("k"), ClaimToken(older.claim_token))
    async with await psycopg.AsyncConnection.connect(db.conninfo) as hold:
        async with hold.transaction():
            # Hold the action row, so the second INTENDED stops between its check and its write.
            await hold.execute("SELECT 1 FROM inbox_actions WHERE namespace = %s AND event_key = 'k' FOR UPDATE", (ns,))
            intent = asyncio.create_task(
                db.run(lambda conn: record_action(conn, fence, "send-welcome:v1", ActionState.INTENDED, now=clock.now))
            )

            await eventually(lambda: _waiting_on_actions(db), "the second INTENDED waiting on the held action row")
            clock.advance(31)
            takeover = await work.Claim(inbox_pb2.ClaimRequest(namespaces=[ns]))
        try:
            written = await intent
        except ClaimSuperseded:
            written = None
    current = await _current_fencing_token(db, ns)
    if takeover.events:
        # The takeover committed first: the older claim's intent must have been refused.
        assert written is None, "a superseded claim recorded INTENDED after the takeover committed"
        assert current == takeover.events[0].fencing_token
    else:
        # The intent held the event while it decided; the takeover found nothing to take.
        assert written is not None and written.fencing_token == older.fencing_token == current


async def _waiting_on_actions(db: Database) -> bool:
    async def count(conn: Any) -> bool:
        cur = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
            ("%inbox_actions%",),
        )
        return int((await cur.fetchone())[0]) > 0

    return await db.run(count)


async def _current_fencing_token(db: Database, ns: str) -> int:
    async def read(conn: Any) -> int:
        cur = await conn.execute(
            "SELECT c.fencing_token FROM inbox_events e JOIN inbox_claims c ON c.claim_token = e.claim_token"
            " WHERE e.namespace = %s AND e.event_key = 'k'",
            (ns,),
        )
        return int((await cur.fetchone())[0])

    return await db.run(read)


async def test_every_record_is_kept_in_the_actions_history_applied_or_not(
    work: InboxServiceStub, admin: InboxAdminServiceStub, db: Database, ns: str, clock: FakeClock
) -> None:
    older, newer = await taken_over(work, ns, clock)
    await record(work, newer, INTENDED)
    await record(work, older, FAILED, detail="late")
    await record(work, newer, SUCCEEDED, external_ref="m")
    await record(work, newer, SUCCEEDED, external_ref="m")
    history = await db.run(lambda conn: action_history(conn, ns, "k"))
    assert [(h.state, h.fencing_token, h.applied, h.detail) for h in history] == [
        (ActionState.INTENDED, older.fencing_token, True, ""),
        (ActionState.INTENDED, newer.fencing_token, True, ""),
        (ActionState.FAILED, older.fencing_token, False, "late"),
        (ActionState.SUCCEEDED, newer.fencing_token, True, ""),
        (ActionState.SUCCEEDED, newer.fencing_token, False, ""),
    ]
    # Operators see the same in GetEvent.
    shown = (await admin.GetEvent(admin_pb2.GetEventRequest(namespace=ns, event_key="k"))).event.action_history
    assert [(h.action, h.state, h.fencing_token, h.applied, h.external_ref) for h in shown] == [
        ("send-welcome:v1", INTENDED, older.fencing_token, True, ""),
        ("send-welcome:v1", INTENDED, newer.fencing_token, True, ""),
        ("send-welcome:v1", FAILED, older.fencing_token, False, ""),
        ("send-welcome:v1", SUCCEEDED, newer.fencing_token, True, "m"),
        ("send-welcome:v1", SUCCEEDED, newer.fencing_token, False, "m"),
    ]
    assert all(h.HasField("recorded_at") for h in shown)
