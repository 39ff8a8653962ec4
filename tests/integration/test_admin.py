"""InboxAdminService: GetEvent, ListEvents, Replay and Stats against a real server and database."""

from __future__ import annotations

import asyncio
import hashlib
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from inboxd.domain.operator_views import ListPosition
from inboxd.domain.page_tokens import encode_page_token
from inboxd.serving.server import RunningServer
from inboxd.store.database import Database
from inboxd_client.v1 import admin_pb2, inbox_pb2, types_pb2
from inboxd_client.v1.admin_pb2_grpc import InboxAdminServiceStub
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import FakeClock
from tests.integration.admin_fixtures import clocked_admin, completed_event, dead_lettered_event
from tests.integration.helpers import accept_request, expect_status, seconds
from tests.integration.test_claims import claim_none, claim_one, fenced

__all__ = ["clocked_admin"]  # the fixture, imported so pytest finds it

INVALID = grpc.StatusCode.INVALID_ARGUMENT
PENDING = types_pb2.EVENT_STATE_PENDING
DEAD = types_pb2.EVENT_STATE_DEAD_LETTERED
COMPLETED = types_pb2.EVENT_STATE_COMPLETED


def at(clock: FakeClock, offset_seconds: float) -> Timestamp:
    ts = Timestamp()
    ts.FromDatetime(clock.now + timedelta(seconds=offset_seconds))
    return ts


async def get(admin: InboxAdminServiceStub, ns: str, key: str) -> admin_pb2.Event:
    answer = await admin.GetEvent(admin_pb2.GetEventRequest(namespace=ns, event_key=key))
    event: admin_pb2.Event = answer.event
    return event


async def test_get_event_returns_the_whole_record_with_claims_actions_and_conflicts(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, ns: str, clock: FakeClock
) -> None:
    await work.Accept(accept_request(ns, "k", {"n": 1}, metadata={"delivery": "d1"}, message_id="m1"))
    await work.Accept(accept_request(ns, "k", {"n": 2}))  # a conflicting copy
    first = await claim_one(work, ns, worker_id="w1")
    await work.Fail(inbox_pb2.FailRequest(**fenced(first), error="timeout upstream", retry_after=seconds(0)))
    second = await claim_one(work, ns, worker_id="w2")
    await work.RecordActionOutcome(
        inbox_pb2.RecordActionOutcomeRequest(
            **fenced(second), action="send:v1", state=types_pb2.ACTION_STATE_SUCCEEDED, external_ref="msg_9"
        )
    )
    await work.Complete(inbox_pb2.CompleteRequest(**fenced(second)))

    event = await get(clocked_admin, ns, "k")
    assert (event.summary.state, event.summary.attempt, event.summary.last_error) == (COMPLETED, 2, "timeout upstream")
    assert event.payload == b'{"n": 1}'
    assert (dict(event.metadata), event.message_id) == ({"delivery": "d1"}, "m1")
    assert event.disposition == types_pb2.DISPOSITION_APPLIED
    assert event.completed_at.ToDatetime().timestamp() == pytest.approx(clock.now.timestamp())
    assert [(c.worker_id, c.attempt, c.outcome) for c in event.claims] == [("w1", 1, "failed"), ("w2", 2, "completed")]
    assert [c.fencing_token for c in event.claims] == [first.fencing_token, second.fencing_token]
    assert [(a.action, a.state, a.external_ref) for a in event.actions] == [
        ("send:v1", types_pb2.ACTION_STATE_SUCCEEDED, "msg_9")
    ]
    # A copy's payload travels only when asked for; its digest always.
    assert [(c.payload, c.payload_sha256) for c in event.conflicts] == [(b"", hashlib.sha256(b'{"n": 2}').digest())]
    asked = admin_pb2.GetEventRequest(namespace=ns, event_key="k", include_conflict_payloads=True)
    assert [c.payload for c in (await clocked_admin.GetEvent(asked)).event.conflicts] == [b'{"n": 2}']
    assert list(event.replays) == []


async def test_get_event_of_an_unknown_key_is_not_found(clocked_admin: InboxAdminServiceStub, ns: str) -> None:
    request = admin_pb2.GetEventRequest(namespace=ns, event_key="ghost")
    await expect_status(clocked_admin.GetEvent(request), grpc.StatusCode.NOT_FOUND)
    await expect_status(clocked_admin.GetEvent(admin_pb2.GetEventRequest(namespace=ns)), INVALID)


async def test_list_events_pages_newest_first_and_carries_no_payloads(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, ns: str, clock: FakeClock
) -> None:
    for i in range(5):
        await work.Accept(accept_request(ns, f"e{i}", {"secret": f"payload-marker-{i}"}))
        clock.advance(1)
    seen: list[str] = []
    token = ""
    pages = 0
    while True:
        request = admin_pb2.ListEventsRequest(namespace=ns, page_size=2, page_token=token)
        page = await clocked_admin.ListEvents(request)
        assert b"payload-marker" not in page.SerializeToString()
        seen += [e.event_key for e in page.events]
        pages += 1
        token = page.next_page_token
        if not token:
            break
    assert seen == ["e4", "e3", "e2", "e1", "e0"]
    assert pages == 3


async def test_list_events_filters_by_state_and_a_later_arrival_does_not_disturb_paging(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, ns: str, clock: FakeClock
) -> None:
    for key in ("d1", "d2", "d3"):
        await dead_lettered_event(work, ns, key)
        clock.advance(1)
    await completed_event(work, ns, "done")
    first = await clocked_admin.ListEvents(admin_pb2.ListEventsRequest(namespace=ns, state=DEAD, page_size=2))
    assert [e.event_key for e in first.events] == ["d3", "d2"]
    assert all(e.last_error == "bad schema" and e.state == DEAD for e in first.events)
    clock.advance(1)
    await dead_lettered_event(work, ns, "d4")  # newer than the cursor: not on later pages
    await work.Accept(accept_request(ns, "waiting"))
    rest = await clocked_admin.ListEvents(
        admin_pb2.ListEventsRequest(namespace=ns, state=DEAD, page_size=2, page_token=first.next_page_token)
    )
    assert [e.event_key for e in rest.events] == ["d1"]
    assert rest.next_page_token == ""
    everything = await clocked_admin.ListEvents(admin_pb2.ListEventsRequest(namespace=ns))
    assert {e.event_key for e in everything.events} == {"d1", "d2", "d3", "d4", "done", "waiting"}


@pytest.mark.parametrize(
    "request_fields",
    [{"page_size": 1001}, {"page_size": -1}, {"page_token": "p1.not-base64!"}, {"page_token": "garbage"}],
)
async def test_list_events_refuses_bad_paging(
    clocked_admin: InboxAdminServiceStub, ns: str, request_fields: dict[str, object]
) -> None:
    request = admin_pb2.ListEventsRequest(namespace=ns, **request_fields)  # type: ignore[arg-type]
    await expect_status(clocked_admin.ListEvents(request), INVALID)


@pytest.mark.parametrize("namespace", ["a\x00b", "\ud800"])
async def test_a_page_token_holding_what_postgresql_cannot_take_is_refused_naming_page_token(
    clocked_admin: InboxAdminServiceStub, namespace: str
) -> None:
    forged = encode_page_token(ListPosition(datetime.now(UTC), namespace, "k"))
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await clocked_admin.ListEvents(admin_pb2.ListEventsRequest(page_token=forged))
    assert refused.value.code() == INVALID
    assert (refused.value.details() or "").startswith("page_token: ")


@pytest.mark.parametrize("reason", ["", "   "])
async def test_replay_needs_a_reason(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, ns: str, reason: str
) -> None:
    await dead_lettered_event(work, ns, "k")
    error = await expect_status(
        clocked_admin.Replay(admin_pb2.ReplayRequest(namespace=ns, event_key="k", reason=reason)), INVALID
    )
    assert "reason" in (error.details() or "")
    assert (await get(clocked_admin, ns, "k")).summary.state == DEAD


async def test_replay_returns_a_dead_letter_to_pending_claimable_now_with_attempts_reset_and_audited(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, db: Database, ns: str, clock: FakeClock
) -> None:
    await dead_lettered_event(work, ns, "k", error="schema v2 unknown")
    clock.advance(30)
    answer = await clocked_admin.Replay(admin_pb2.ReplayRequest(namespace=ns, event_key="k", reason="deployed v2"))
    event = answer.event
    assert (event.summary.state, event.summary.attempt) == (PENDING, 0)
    assert event.summary.available_at.ToDatetime().timestamp() == pytest.approx(clock.now.timestamp())
    [audit] = event.replays
    assert (audit.actor, audit.reason, audit.state_before) == ("anonymous", "deployed v2", DEAD)
    assert audit.replayed_at.ToDatetime().timestamp() == pytest.approx(clock.now.timestamp())
    assert [c.outcome for c in event.claims] == ["dead_lettered"]  # history kept, nothing else ended

    async def audit_rows(conn: object) -> list[tuple[object, ...]]:
        cur = await conn.execute(  # type: ignore[attr-defined]
            "SELECT actor, reason, state_before FROM inbox_replays WHERE namespace = %s AND event_key = %s", (ns, "k")
        )
        rows: list[tuple[object, ...]] = await cur.fetchall()
        return rows

    assert await db.run(audit_rows) == [("anonymous", "deployed v2", "dead_lettered")]
    again = await claim_one(work, ns)
    assert again.attempt == 1
    assert again.last_error == "schema v2 unknown"


async def test_replay_keeps_succeeded_actions_and_their_idempotency_keys(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, ns: str
) -> None:
    await work.Accept(accept_request(ns, "k"))
    event = await claim_one(work, ns)
    action = {"action": "charge:v1"}
    intent = await work.RecordActionOutcome(
        inbox_pb2.RecordActionOutcomeRequest(**fenced(event), **action, state=types_pb2.ACTION_STATE_INTENDED)
    )
    await work.RecordActionOutcome(
        inbox_pb2.RecordActionOutcomeRequest(**fenced(event), **action, state=types_pb2.ACTION_STATE_SUCCEEDED)
    )
    await work.Complete(inbox_pb2.CompleteRequest(**fenced(event)))
    await clocked_admin.Replay(admin_pb2.ReplayRequest(namespace=ns, event_key="k", reason="customer asked"))

    replayed = await claim_one(work, ns)
    [kept] = replayed.actions
    assert (kept.action, kept.state) == ("charge:v1", types_pb2.ACTION_STATE_SUCCEEDED)
    assert kept.idempotency_key == intent.action.idempotency_key
    # A well-behaved worker sees SUCCEEDED and does not act again; acting again is refused.
    await expect_status(
        work.RecordActionOutcome(
            inbox_pb2.RecordActionOutcomeRequest(**fenced(replayed), **action, state=types_pb2.ACTION_STATE_INTENDED)
        ),
        grpc.StatusCode.FAILED_PRECONDITION,
    )
    # The old claim ended with the completion; Replay does not revive it.
    await expect_status(work.Complete(inbox_pb2.CompleteRequest(**fenced(event))), grpc.StatusCode.ABORTED)


async def test_replay_of_a_live_event_is_refused_and_of_an_unknown_one_not_found(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, ns: str
) -> None:
    await work.Accept(accept_request(ns, "processing"))
    await claim_one(work, ns)
    await work.Accept(accept_request(ns, "pending"))
    for key in ("pending", "processing"):
        error = await expect_status(
            clocked_admin.Replay(admin_pb2.ReplayRequest(namespace=ns, event_key=key, reason="r")),
            grpc.StatusCode.FAILED_PRECONDITION,
        )
        assert "COMPLETED or DEAD_LETTERED" in (error.details() or "")
    await expect_status(
        clocked_admin.Replay(admin_pb2.ReplayRequest(namespace=ns, event_key="ghost", reason="r")),
        grpc.StatusCode.NOT_FOUND,
    )
    assert [r.summary.attempt for r in [await get(clocked_admin, ns, "pending")]] == [0]


async def test_replay_wakes_a_waiting_claim(
    work: InboxServiceStub,
    clocked_admin: InboxAdminServiceStub,
    clocked_server: RunningServer,
    ns: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await dead_lettered_event(work, ns, "k")
    # Without a wake-up the Claim would sleep past its whole wait and come back empty.
    monkeypatch.setattr(clocked_server.inbox, "fallback_poll_seconds", 60.0)
    waiting = asyncio.ensure_future(work.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], wait=seconds(20))))
    for _ in range(500):  # bounded: until the Claim is registered as a waiter
        if len(clocked_server.inbox.bus):
            break
        await asyncio.sleep(0.01)
    assert len(clocked_server.inbox.bus), "the Claim never started waiting"
    await clocked_admin.Replay(admin_pb2.ReplayRequest(namespace=ns, event_key="k", reason="r"))
    answer = await asyncio.wait_for(waiting, 15)
    assert [e.event_key for e in answer.events] == ["k"]


async def test_stats_counts_states_and_ages_only_claimable_events_from_available_at(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, ns: str, clock: FakeClock
) -> None:
    await dead_lettered_event(work, ns, "dead")
    await completed_event(work, ns, "done")
    await work.Accept(accept_request(ns, "delayed", available_at=at(clock, 3600)))
    await work.Accept(accept_request(ns, "backing-off"))
    backing = await claim_one(work, ns)
    await work.Fail(inbox_pb2.FailRequest(**fenced(backing), error="x", retry_after=seconds(600)))
    await work.Accept(accept_request(ns, "stuck", available_at=at(clock, -120)))
    stuck = await claim_one(work, ns)
    await work.RecordActionOutcome(
        inbox_pb2.RecordActionOutcomeRequest(**fenced(stuck), action="a", state=types_pb2.ACTION_STATE_UNKNOWN)
    )
    clock.advance(100)
    await work.Accept(accept_request(ns, "claimable", available_at=at(clock, -20)))
    clock.advance(5)

    [stats] = (await clocked_admin.Stats(admin_pb2.StatsRequest(namespace=ns))).namespaces
    assert stats.namespace == ns
    assert (stats.pending, stats.processing, stats.completed, stats.dead_lettered) == (3, 1, 1, 1)
    assert stats.unresolved_actions == 1
    # 25 s: from the claimable event's available_at. Not 5 s (its accepted_at), not
    # 105 s (the delayed and backing-off events, accepted earlier but not due),
    # not 225 s (the PROCESSING event, whose worker holds it).
    assert stats.HasField("oldest_claimable_age")
    assert stats.oldest_claimable_age.ToTimedelta() == timedelta(seconds=25)


async def test_stats_leave_the_oldest_age_absent_when_only_delayed_events_wait(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, ns: str, clock: FakeClock
) -> None:
    await work.Accept(accept_request(ns, "later", available_at=at(clock, 600)))
    await claim_none(work, ns)
    [stats] = (await clocked_admin.Stats(admin_pb2.StatsRequest(namespace=ns))).namespaces
    assert stats.pending == 1
    assert not stats.HasField("oldest_claimable_age")
    everywhere = await clocked_admin.Stats(admin_pb2.StatsRequest())
    assert ns in {s.namespace for s in everywhere.namespaces}
