"""SettleAction, EndClaim and Discard through the admin API: applied, audited, fenced by what the operator saw."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc

from inboxd.store.database import Database
from inboxd_client.v1 import admin_pb2, admin_pb2_grpc, inbox_pb2, inbox_pb2_grpc, types_pb2
from inboxd_client.v1.admin_pb2_grpc import InboxAdminServiceStub
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import FakeClock
from tests.integration.admin_fixtures import clocked_admin, dead_lettered_event
from tests.integration.helpers import accept_request, expect_status, seconds
from tests.integration.test_auth import bearer, chan, guarded, tokens
from tests.integration.test_claims import claim_none, claim_one, fenced

__all__ = ["chan", "clocked_admin", "guarded", "tokens"]  # fixtures, imported so pytest finds them

PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION
INVALID = grpc.StatusCode.INVALID_ARGUMENT
NOT_FOUND = grpc.StatusCode.NOT_FOUND
PENDING = types_pb2.EVENT_STATE_PENDING
PROCESSING = types_pb2.EVENT_STATE_PROCESSING
COMPLETED = types_pb2.EVENT_STATE_COMPLETED
DEAD = types_pb2.EVENT_STATE_DEAD_LETTERED
SUCCEEDED = types_pb2.ACTION_STATE_SUCCEEDED
FAILED = types_pb2.ACTION_STATE_FAILED
UNKNOWN = types_pb2.ACTION_STATE_UNKNOWN
INTENDED = types_pb2.ACTION_STATE_INTENDED
SETTLE = admin_pb2.OPERATOR_ACTION_KIND_SETTLE_ACTION
END_CLAIM = admin_pb2.OPERATOR_ACTION_KIND_END_CLAIM
DISCARD = admin_pb2.OPERATOR_ACTION_KIND_DISCARD


async def record(work: InboxServiceStub, event: inbox_pb2.ClaimedEvent, state: Any, **fields: Any) -> Any:
    request = inbox_pb2.RecordActionOutcomeRequest(**fenced(event), action="send:v1", state=state, **fields)
    return (await work.RecordActionOutcome(request)).action


async def get(admin: InboxAdminServiceStub, ns: str, key: str) -> admin_pb2.Event:
    event: admin_pb2.Event = (await admin.GetEvent(admin_pb2.GetEventRequest(namespace=ns, event_key=key))).event
    return event


def settle(ns: str, key: str, seen: Any, **fields: Any) -> admin_pb2.SettleActionRequest:
    """A settlement of send:v1 as SUCCEEDED, decided on the action record `seen`."""
    values: dict[str, Any] = {
        "namespace": ns,
        "event_key": key,
        "action": "send:v1",
        "outcome": SUCCEEDED,
        "external_ref": "msg_42",
        "reason": "found it in the provider's log",
        "expected_state": seen.state,
        "expected_fencing_token": seen.fencing_token,
    }
    return admin_pb2.SettleActionRequest(**{**values, **fields})


async def unknown_and_dead(work: InboxServiceStub, ns: str, key: str = "k") -> inbox_pb2.ClaimedEvent:
    """An event whose send timed out (UNKNOWN) and that then dead-lettered; answers its claim."""
    await work.Accept(accept_request(ns, key))
    event = await claim_one(work, ns)
    await record(work, event, INTENDED)
    await record(work, event, UNKNOWN, detail="TimeoutError")
    await work.Fail(inbox_pb2.FailRequest(**fenced(event), error="ActionUnresolved", permanent=True))
    return event


async def test_settle_action_records_the_operators_outcome_audited_and_the_next_claim_sees_it_settled(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, ns: str, clock: FakeClock
) -> None:
    claim = await unknown_and_dead(work, ns)
    [seen] = (await get(clocked_admin, ns, "k")).actions
    answer = await clocked_admin.SettleAction(settle(ns, "k", seen))

    [action] = answer.event.actions
    assert (action.state, action.external_ref, action.idempotency_key) == (SUCCEEDED, "msg_42", seen.idempotency_key)
    # The settlement's own fencing token, newer than every claim before it.
    assert action.fencing_token > claim.fencing_token
    [audit] = answer.event.operator_actions
    assert (audit.kind, audit.actor, audit.reason, audit.subject) == (
        SETTLE,
        "anonymous",
        "found it in the provider's log",
        "send:v1",
    )
    assert audit.before == f"UNKNOWN by claim {claim.fencing_token}"
    assert audit.after == f"SUCCEEDED by claim {action.fencing_token}, external_ref 'msg_42'"
    assert audit.acted_at.ToDatetime().timestamp() == clock.now.timestamp()
    assert answer.event.action_history[-1].applied

    # The dead claim's late outcome is kept in the history, and moves nothing.
    await record(work, claim, FAILED, detail="late")
    await clocked_admin.Replay(admin_pb2.ReplayRequest(namespace=ns, event_key="k", reason="settled"))
    again = await claim_one(work, ns)
    assert [(a.state, a.external_ref) for a in again.actions] == [(SUCCEEDED, "msg_42")]


async def test_settle_action_is_refused_once_the_action_moved_on(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, ns: str
) -> None:
    await unknown_and_dead(work, ns)
    [seen] = (await get(clocked_admin, ns, "k")).actions
    # A view of another claim's record, or of another state: refused, nothing written.
    stale = await expect_status(
        clocked_admin.SettleAction(settle(ns, "k", seen, expected_fencing_token=seen.fencing_token - 1)),
        PRECONDITION,
    )
    assert "moved on" in (stale.details() or "")
    await expect_status(clocked_admin.SettleAction(settle(ns, "k", seen, expected_state=INTENDED)), PRECONDITION)
    await clocked_admin.SettleAction(settle(ns, "k", seen, outcome=FAILED))
    # Settled once: the second operator, acting on the same old view, is refused.
    await expect_status(clocked_admin.SettleAction(settle(ns, "k", seen)), PRECONDITION)
    event = await get(clocked_admin, ns, "k")
    assert [a.state for a in event.actions] == [FAILED]
    assert len(event.operator_actions) == 1


async def test_an_intended_action_is_settled_only_once_its_claim_is_no_longer_current(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, ns: str
) -> None:
    await work.Accept(accept_request(ns, "k"))
    first = await claim_one(work, ns, lease=seconds(3600))
    await record(work, first, INTENDED)
    [seen] = (await get(clocked_admin, ns, "k")).actions
    held = await expect_status(clocked_admin.SettleAction(settle(ns, "k", seen, outcome=FAILED)), PRECONDITION)
    assert "still holds the event" in (held.details() or "")

    await clocked_admin.EndClaim(
        admin_pb2.EndClaimRequest(
            namespace=ns, event_key="k", expected_fencing_token=first.fencing_token, reason="worker gone"
        )
    )
    settled = await clocked_admin.SettleAction(settle(ns, "k", seen, outcome=FAILED, detail="not in the log"))
    assert [(a.state, a.detail) for a in settled.event.actions] == [(FAILED, "not in the log")]
    # FAILED for sure: the next claim acts again, under the same idempotency key.
    second = await claim_one(work, ns)
    retried = await record(work, second, INTENDED)
    assert (retried.state, retried.idempotency_key) == (INTENDED, seen.idempotency_key)


async def test_settle_action_checks_its_fields_then_the_event_then_the_action(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, ns: str
) -> None:
    await unknown_and_dead(work, ns)
    [seen] = (await get(clocked_admin, ns, "k")).actions
    wrong: list[tuple[dict[str, Any], str]] = [
        ({"outcome": UNKNOWN}, "outcome"),
        ({"reason": " "}, "reason"),
        ({"expected_fencing_token": 0}, "expected_fencing_token"),
        ({"expected_state": SUCCEEDED}, "expected_state"),
        ({"action": ""}, "action"),
    ]
    for fields, named in wrong:
        error = await expect_status(clocked_admin.SettleAction(settle(ns, "k", seen, **fields)), INVALID)
        assert (error.details() or "").startswith(named), error.details()
    await expect_status(clocked_admin.SettleAction(settle(ns, "ghost", seen)), NOT_FOUND)
    missing = await expect_status(clocked_admin.SettleAction(settle(ns, "k", seen, action="other:v1")), NOT_FOUND)
    assert "no action 'other:v1'" in (missing.details() or "")


async def test_end_claim_returns_the_event_to_pending_now_and_its_token_dies(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, ns: str
) -> None:
    await work.Accept(accept_request(ns, "k"))
    dead = await claim_one(work, ns, lease=seconds(3600), worker_id="w-dead")
    answer = await clocked_admin.EndClaim(
        admin_pb2.EndClaimRequest(
            namespace=ns, event_key="k", expected_fencing_token=dead.fencing_token, reason="pod deleted"
        )
    )
    event = answer.event
    # Given back by default (count_attempt false): the dead worker's attempt does not count.
    assert (event.summary.state, event.summary.attempt) == (PENDING, 0)
    assert event.summary.last_error == f"claim {dead.fencing_token} ended by operator anonymous: pod deleted"
    assert [(c.fencing_token, c.outcome) for c in event.claims] == [(dead.fencing_token, "ended")]
    [audit] = event.operator_actions
    assert (audit.kind, audit.reason) == (END_CLAIM, "pod deleted")
    assert audit.before == f"PROCESSING, claim {dead.fencing_token} of worker w-dead, attempt 1"
    assert audit.after == "PENDING, attempt 0 (the ended claim's attempt given back)"

    await expect_status(work.Complete(inbox_pb2.CompleteRequest(**fenced(dead))), grpc.StatusCode.ABORTED)
    assert (await claim_one(work, ns)).attempt == 1


async def test_end_claim_may_count_the_attempt_and_wakes_a_waiting_claim(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, ns: str
) -> None:
    await work.Accept(accept_request(ns, "k"))
    dead = await claim_one(work, ns, lease=seconds(3600))
    waiting = asyncio.ensure_future(work.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], wait=seconds(20))))
    await asyncio.sleep(0.2)  # let the Claim start waiting: what it waits on is the EndClaim's wake-up
    started = time.monotonic()
    await clocked_admin.EndClaim(
        admin_pb2.EndClaimRequest(
            namespace=ns,
            event_key="k",
            expected_fencing_token=dead.fencing_token,
            count_attempt=True,
            reason="node lost",
        )
    )
    [taken] = (await waiting).events
    assert time.monotonic() - started < 5, "the waiting Claim was not woken by the EndClaim"
    assert (taken.event_key, taken.attempt) == ("k", 2)


async def test_end_claim_frees_an_ordering_key_from_a_dead_worker_at_once(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, ns: str
) -> None:
    await work.Accept(accept_request(ns, "first", ordering_key="order-1"))
    await work.Accept(accept_request(ns, "second", ordering_key="order-1"))
    dead = await claim_one(work, ns, lease=seconds(3600))
    assert dead.event_key == "first"
    await claim_none(work, ns)  # the key is held for an hour
    await clocked_admin.EndClaim(
        admin_pb2.EndClaimRequest(
            namespace=ns, event_key="first", expected_fencing_token=dead.fencing_token, reason="worker gone"
        )
    )
    # The key's first event comes back first, now, not after the hour.
    again = await claim_one(work, ns)
    assert again.event_key == "first"
    await work.Complete(inbox_pb2.CompleteRequest(**fenced(again)))
    assert (await claim_one(work, ns)).event_key == "second"


async def test_end_claim_is_refused_for_a_claim_that_moved_on(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, ns: str, clock: FakeClock
) -> None:
    await work.Accept(accept_request(ns, "k"))
    old = await claim_one(work, ns, lease=seconds(10))
    clock.advance(11)
    new = await claim_one(work, ns, lease=seconds(60))  # the lease expired and another worker took over

    def ending(token: int) -> admin_pb2.EndClaimRequest:
        return admin_pb2.EndClaimRequest(namespace=ns, event_key="k", expected_fencing_token=token, reason="stuck")

    moved = await expect_status(clocked_admin.EndClaim(ending(old.fencing_token)), PRECONDITION)
    assert f"claim {new.fencing_token} holds it now" in (moved.details() or "")
    await work.Complete(inbox_pb2.CompleteRequest(**fenced(new)))
    await expect_status(clocked_admin.EndClaim(ending(new.fencing_token)), PRECONDITION)
    await expect_status(
        clocked_admin.EndClaim(admin_pb2.EndClaimRequest(namespace=ns, event_key="k", reason="x")), INVALID
    )
    await expect_status(
        clocked_admin.EndClaim(admin_pb2.EndClaimRequest(namespace=ns, event_key="k", expected_fencing_token=1)),
        INVALID,
    )
    await expect_status(
        clocked_admin.EndClaim(
            admin_pb2.EndClaimRequest(namespace=ns, event_key="ghost", expected_fencing_token=1, reason="x")
        ),
        NOT_FOUND,
    )
    event = await get(clocked_admin, ns, "k")
    assert (event.summary.state, list(event.operator_actions)) == (COMPLETED, [])


def discard(ns: str, key: str, seen: Any, reason: str = "test traffic from staging") -> admin_pb2.DiscardRequest:
    return admin_pb2.DiscardRequest(namespace=ns, event_key=key, expected_state=seen, reason=reason)


async def test_discard_completes_a_pending_or_dead_lettered_event_as_ignored_and_keeps_it(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, ns: str
) -> None:
    await dead_lettered_event(work, ns, "dead", error="bad schema")
    await work.Accept(accept_request(ns, "waiting"))
    for key, state, before in [("waiting", PENDING, "PENDING, attempt 0"), ("dead", DEAD, "DEAD_LETTERED, attempt 1")]:
        event = (await clocked_admin.Discard(discard(ns, key, state))).event
        assert (event.summary.state, event.disposition, event.disposition_reason) == (
            COMPLETED,
            types_pb2.DISPOSITION_IGNORED,
            "test traffic from staging",
        )
        [audit] = event.operator_actions
        assert (audit.kind, audit.before, audit.after) == (DISCARD, before, "COMPLETED, IGNORED")
    # The dead letter keeps its history: its claim and its last error.
    dead = await get(clocked_admin, ns, "dead")
    assert (dead.summary.last_error, [c.outcome for c in dead.claims]) == ("bad schema", ["dead_lettered"])
    await claim_none(work, ns)


async def test_discard_frees_the_ordering_key_for_the_next_event(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, ns: str
) -> None:
    await work.Accept(accept_request(ns, "a-poison", ordering_key="o"))
    await work.Accept(accept_request(ns, "b-next", ordering_key="o"))
    held = await claim_one(work, ns)
    await work.Fail(inbox_pb2.FailRequest(**fenced(held), error="boom", retry_after=seconds(3600)))
    await claim_none(work, ns)  # "b-next" waits behind the retrying "a-poison"
    await clocked_admin.Discard(discard(ns, "a-poison", PENDING, reason="never runs"))
    assert (await claim_one(work, ns)).event_key == "b-next"


async def test_discard_is_refused_when_the_event_moved_on(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, ns: str
) -> None:
    await work.Accept(accept_request(ns, "k"))
    await claim_one(work, ns)  # a worker took it meanwhile
    moved = await expect_status(clocked_admin.Discard(discard(ns, "k", PENDING)), PRECONDITION)
    assert "you saw it PENDING, it is PROCESSING" in (moved.details() or "")
    # Only the discardable states may be named; a reason is required.
    await expect_status(clocked_admin.Discard(discard(ns, "k", PROCESSING)), INVALID)
    await expect_status(clocked_admin.Discard(discard(ns, "k", PENDING, reason="")), INVALID)
    await expect_status(clocked_admin.Discard(discard(ns, "ghost", PENDING)), NOT_FOUND)
    assert (await get(clocked_admin, ns, "k")).summary.state == PROCESSING


async def test_operator_acts_need_the_namespace_granted_and_name_the_calling_token(
    chan: grpc.aio.Channel, tokens: Any, db: Database, ns: str
) -> None:
    mine, theirs = f"tenant-a/{ns}", f"tenant-b/{ns}"
    stub = inbox_pb2_grpc.InboxServiceStub(chan)
    admin = admin_pb2_grpc.InboxAdminServiceStub(chan)
    for space in (mine, theirs):
        await stub.Accept(accept_request(space, "k"), metadata=bearer(tokens.root))
    # admin-a is granted tenant-a/* only: tenant-b's events are not its to act on.
    for call in (
        admin.Discard(discard(theirs, "k", PENDING), metadata=bearer(tokens.admin_a)),
        admin.EndClaim(
            admin_pb2.EndClaimRequest(namespace=theirs, event_key="k", expected_fencing_token=1, reason="x"),
            metadata=bearer(tokens.admin_a),
        ),
        admin.SettleAction(
            settle(theirs, "k", types_pb2.ActionRecord(state=UNKNOWN, fencing_token=1)),
            metadata=bearer(tokens.admin_a),
        ),
        # A worker's token has no admin scope, whatever its namespaces.
        admin.Discard(discard(mine, "k", PENDING), metadata=bearer(tokens.worker_a)),
    ):
        await expect_status(call, grpc.StatusCode.PERMISSION_DENIED)
    answer = await admin.Discard(discard(mine, "k", PENDING), metadata=bearer(tokens.admin_a))
    assert [(a.actor, a.kind) for a in answer.event.operator_actions] == [("admin-a", DISCARD)]

    async def audit_rows(conn: Any) -> list[tuple[str, str]]:
        cur = await conn.execute(
            "SELECT namespace, actor FROM inbox_operator_actions WHERE namespace = ANY(%s)", ([mine, theirs],)
        )
        return [(str(n), str(a)) for n, a in await cur.fetchall()]

    assert await db.run(audit_rows) == [(mine, "admin-a")]
