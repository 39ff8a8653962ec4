"""Bulk operations through the admin API: validation, dry runs, replays and ignores counted from the audit, cancels."""

from __future__ import annotations

import uuid

import grpc
import psycopg
import pytest

from inboxd.serving.server import RunningServer
from inboxd.store.database import Database
from inboxd_client.v1 import admin_pb2, inbox_pb2, types_pb2
from inboxd_client.v1.admin_pb2_grpc import InboxAdminServiceStub
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.integration.bulk_fixtures import (
    CANCELLED,
    COMPLETED,
    DEAD,
    DONE,
    IGNORE,
    PENDING,
    RUNNING,
    audit_rows,
    carry,
    dead_letters,
    get,
    key,
    request,
    start,
    states,
)
from tests.integration.helpers import accept_request, expect_status
from tests.integration.test_auth import Tokens, bearer, chan, guarded, tokens
from tests.integration.test_claims import claim_one, fenced

__all__ = ["chan", "guarded", "tokens"]  # fixtures, imported so pytest finds them

INVALID = grpc.StatusCode.INVALID_ARGUMENT


def _ts(seconds: int) -> dict[str, object]:
    return {"seconds": seconds}


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"action": admin_pb2.BULK_ACTION_UNSPECIFIED}, "action"),
        ({"reason": ""}, "reason"),
        ({"reason": "   "}, "reason"),
        ({"namespace": ""}, "filter.namespace_pattern"),
        ({"namespace": "a\x00b"}, "filter.namespace_pattern"),
        ({"namespace": "n" * 513}, "filter.namespace_pattern"),
        ({"filter_": {"states": [types_pb2.EVENT_STATE_PENDING]}}, "filter.states[0]"),
        ({"filter_": {"states": [DEAD, types_pb2.EVENT_STATE_PROCESSING]}}, "filter.states[1]"),
        ({"action": IGNORE, "filter_": {"states": [COMPLETED]}}, "filter.states[0]"),
        ({"filter_": {"states": [99]}}, "filter.states[0]"),
        ({"rate": -1.0}, "rate"),
        ({"rate": 10_000.5}, "rate"),
        ({"rate": float("nan")}, "rate"),
        ({"filter_": {"accepted_from": _ts(200), "accepted_until": _ts(100)}}, "filter.accepted_until"),
        ({"filter_": {"accepted_from": _ts(100), "accepted_until": _ts(100)}}, "filter.accepted_until"),
        ({"filter_": {"event_types": ["ok", ""]}}, "filter.event_types[1]"),
        ({"filter_": {"event_types": ["t" * 513]}}, "filter.event_types[0]"),
        ({"filter_": {"ordering_key": "o" * 513}}, "filter.ordering_key"),
        ({"filter_": {"error_contains": "e" * 4097}}, "filter.error_contains"),
        ({"filter_": {"error_contains": "a\x00"}}, "filter.error_contains"),
    ],
)
async def test_start_refuses_bad_input_naming_the_field(
    admin: InboxAdminServiceStub, ns: str, fields: dict[str, object], field: str
) -> None:
    namespace = str(fields.pop("namespace", ns))
    error = await expect_status(admin.StartBulkOperation(request(namespace, **fields)), INVALID)
    assert (error.details() or "").startswith(f"{field}:"), error.details()


async def test_get_and_cancel_of_an_unknown_or_malformed_id_are_not_found_and_an_empty_one_invalid(
    admin: InboxAdminServiceStub,
) -> None:
    for op_id in ("0b7d2a5e-0000-4000-8000-000000000000", "not-an-id"):
        await expect_status(
            admin.GetBulkOperation(admin_pb2.GetBulkOperationRequest(id=op_id)), grpc.StatusCode.NOT_FOUND
        )
        cancel = admin_pb2.CancelBulkOperationRequest(id=op_id, reason="r")
        await expect_status(admin.CancelBulkOperation(cancel), grpc.StatusCode.NOT_FOUND)
    error = await expect_status(admin.GetBulkOperation(admin_pb2.GetBulkOperationRequest(id="")), INVALID)
    assert (error.details() or "").startswith("id:")
    started = await start(admin, "nothing/matches/here", dry_run=True)
    cancel = admin_pb2.CancelBulkOperationRequest(id=started.operation.id, reason="")
    error = await expect_status(admin.CancelBulkOperation(cancel), INVALID)
    assert (error.details() or "").startswith("reason:")
    paged = admin_pb2.ListBulkOperationsRequest(page_size=101)
    assert ((await expect_status(admin.ListBulkOperations(paged), INVALID)).details() or "").startswith("page_size:")
    damaged = admin_pb2.ListBulkOperationsRequest(page_token="b1.!!")
    error = await expect_status(admin.ListBulkOperations(damaged), INVALID)
    assert (error.details() or "").startswith("page_token:")


async def test_a_dry_run_changes_nothing_and_counts_what_the_real_run_then_changes(
    server: RunningServer, inbox: InboxServiceStub, admin: InboxAdminServiceStub, db: Database, ns: str
) -> None:
    await dead_letters(inbox, ns, 25)
    await dead_letters(inbox, ns + "-other", 3)
    before = await states(db, ns)
    dry = await start(admin, ns, dry_run=True)
    assert dry.operation.state == DONE and dry.operation.dry_run
    assert (dry.operation.matched, dry.operation.done, dry.operation.skipped) == (25, 0, 0)
    # The preview: the first 20, oldest accepted first.
    assert [s.event_key for s in dry.first_matches] == [key(i) for i in range(20)]
    assert all(s.state == DEAD and s.last_error == "SMTP timeout" for s in dry.first_matches)
    assert await states(db, ns) == before
    assert await audit_rows(db, dry.operation.id) == []
    assert (await get(admin, dry.operation.id)).state == DONE

    real = await start(admin, ns)
    assert real.operation.state == RUNNING and real.operation.matched == dry.operation.matched
    await carry(server, real.operation.id)
    ended = await get(admin, real.operation.id)
    assert (ended.state, ended.done, ended.skipped) == (DONE, dry.operation.matched, 0)
    assert sorted(k for _, k in await audit_rows(db, real.operation.id)) == sorted(before)
    assert set((await states(db, ns)).values()) == {"pending"}
    assert set((await states(db, ns + "-other")).values()) == {"dead_lettered"}


async def test_a_replay_changes_each_match_once_as_replay_does_and_skips_one_that_moved_on(
    server: RunningServer, inbox: InboxServiceStub, admin: InboxAdminServiceStub, db: Database, ns: str
) -> None:
    keys = await dead_letters(inbox, ns, 12)
    started = await start(admin, ns, filter_={"error_contains": "SMTP"})
    assert started.operation.matched == 12
    # Between the match and its chunk, an operator replays one alone: it has moved on.
    await admin.Replay(admin_pb2.ReplayRequest(namespace=ns, event_key=keys[3], reason="this one first"))
    await carry(server, started.operation.id, largest_chunk=5)
    ended = await get(admin, started.operation.id)
    assert (ended.state, ended.matched, ended.done, ended.skipped) == (DONE, 12, 11, 1)
    audited = await audit_rows(db, started.operation.id)
    assert len(audited) == len(set(audited)) == 11 and (ns, keys[3]) not in audited
    event = (await admin.GetEvent(admin_pb2.GetEventRequest(namespace=ns, event_key=keys[0]))).event
    assert event.summary.state == PENDING and event.summary.attempt == 0
    assert [r.reason for r in event.replays] == ["after the SMTP outage"]
    # Claimable, as after a single Replay.
    claimed = await claim_one(inbox, ns)
    await inbox.Complete(inbox_pb2.CompleteRequest(**fenced(claimed)))


async def test_the_filter_matches_types_errors_times_and_ordering_keys(
    server: RunningServer, inbox: InboxServiceStub, admin: InboxAdminServiceStub, db: Database, ns: str
) -> None:
    await dead_letters(inbox, ns, 4, error="SMTP timeout")
    other = [accept_request(ns, "typed", event_type="other.type", ordering_key="ok-1")]
    await inbox.AcceptBatch(inbox_pb2.AcceptBatchRequest(events=other))
    claimed = await claim_one(inbox, ns)
    await inbox.Fail(inbox_pb2.FailRequest(**fenced(claimed), error="HTTP 500", permanent=True))
    by_type = await start(admin, ns, dry_run=True, filter_={"event_types": ["other.type"]})
    by_error = await start(admin, ns, dry_run=True, filter_={"error_contains": "SMTP"})
    by_error_case = await start(admin, ns, dry_run=True, filter_={"error_contains": "smtp"})
    by_key = await start(admin, ns, dry_run=True, filter_={"ordering_key": "ok-1"})
    after = by_error.first_matches[-1].accepted_at
    by_time = await start(admin, ns, dry_run=True, filter_={"accepted_from": after})
    before = await start(admin, ns, dry_run=True, filter_={"accepted_until": after})
    pattern = await start(admin, ns.rsplit("/", 1)[0] + "/" + ns.rsplit("/", 1)[1][:6] + "*", dry_run=True)
    assert [o.operation.matched for o in (by_type, by_error, by_error_case, by_key)] == [1, 4, 0, 1]
    assert by_time.operation.matched + before.operation.matched == 5
    assert pattern.operation.matched >= 5


async def test_ignore_completes_each_match_as_ignored_with_the_reason_audited_as_discard(
    server: RunningServer, inbox: InboxServiceStub, admin: InboxAdminServiceStub, db: Database, ns: str
) -> None:
    await dead_letters(inbox, ns, 3)
    await inbox.Accept(accept_request(ns, "waiting"))
    started = await start(admin, ns, IGNORE, reason="duplicates of a bad import", filter_={"states": [PENDING, DEAD]})
    assert started.operation.matched == 4
    await carry(server, started.operation.id)
    ended = await get(admin, started.operation.id)
    assert (ended.state, ended.done, ended.skipped) == (DONE, 4, 0)
    assert len(await audit_rows(db, started.operation.id)) == 4
    event = (await admin.GetEvent(admin_pb2.GetEventRequest(namespace=ns, event_key="waiting"))).event
    assert event.summary.state == COMPLETED
    assert (
        event.disposition == types_pb2.DISPOSITION_IGNORED and event.disposition_reason == "duplicates of a bad import"
    )
    [act] = event.operator_actions
    assert act.kind == admin_pb2.OPERATOR_ACTION_KIND_DISCARD and act.before == "PENDING, attempt 0"


async def test_cancel_stops_between_chunks_and_the_reported_count_is_what_it_changed(
    server: RunningServer, inbox: InboxServiceStub, admin: InboxAdminServiceStub, db: Database, ns: str
) -> None:
    await dead_letters(inbox, ns, 30)
    started = await start(admin, ns)
    op_id = started.operation.id
    assert server.ops is not None
    operators = server.ops.operators

    # Two chunks of 7, then the cancel lands between chunks.
    await operators.run_bulk_chunk(uuid.UUID(op_id), largest=7)
    await operators.run_bulk_chunk(uuid.UUID(op_id), largest=7)
    cancelled = (
        await admin.CancelBulkOperation(admin_pb2.CancelBulkOperationRequest(id=op_id, reason="enough"))
    ).operation
    assert (cancelled.state, cancelled.done, cancelled.cancelled_by) == (CANCELLED, 14, "anonymous")
    await carry(server, op_id)
    again = (await admin.CancelBulkOperation(admin_pb2.CancelBulkOperationRequest(id=op_id, reason="again"))).operation
    assert (again.state, again.done) == (CANCELLED, 14)
    assert len(await audit_rows(db, op_id)) == 14
    assert list((await states(db, ns)).values()).count("pending") == 14


async def test_list_shows_operations_newest_first_paged(admin: InboxAdminServiceStub, ns: str) -> None:
    ids = [(await start(admin, f"{ns}/{i}", dry_run=True)).operation.id for i in range(3)]
    first = await admin.ListBulkOperations(admin_pb2.ListBulkOperationsRequest(page_size=2))
    assert [o.id for o in first.operations] == ids[::-1][:2] and first.next_page_token
    second = await admin.ListBulkOperations(
        admin_pb2.ListBulkOperationsRequest(page_size=2, page_token=first.next_page_token)
    )
    assert second.operations[0].id == ids[0]


async def test_the_filter_must_lie_within_the_callers_grants_and_others_operations_stay_unseen(
    chan: grpc.aio.Channel, tokens: Tokens, ns: str
) -> None:
    stub = InboxAdminServiceStub(chan)
    admin_a, root = bearer(tokens.admin_a), bearer(tokens.root)
    for pattern in (f"tenant-b/{ns}", "*", "tenant-*"):
        call = stub.StartBulkOperation(request(pattern, dry_run=True), metadata=admin_a)
        error = await expect_status(call, grpc.StatusCode.PERMISSION_DENIED)
        assert "filter.namespace_pattern" in (error.details() or "")
    mine = await stub.StartBulkOperation(request(f"tenant-a/{ns}/*", dry_run=True), metadata=admin_a)
    theirs = await stub.StartBulkOperation(request(f"tenant-b/{ns}", dry_run=True), metadata=root)
    assert mine.operation.actor == "admin-a"
    seen = await stub.GetBulkOperation(admin_pb2.GetBulkOperationRequest(id=mine.operation.id), metadata=admin_a)
    assert seen.operation.id == mine.operation.id
    hidden = admin_pb2.GetBulkOperationRequest(id=theirs.operation.id)
    await expect_status(stub.GetBulkOperation(hidden, metadata=admin_a), grpc.StatusCode.NOT_FOUND)
    cancel = admin_pb2.CancelBulkOperationRequest(id=theirs.operation.id, reason="not mine")
    await expect_status(stub.CancelBulkOperation(cancel, metadata=admin_a), grpc.StatusCode.NOT_FOUND)
    listed = await stub.ListBulkOperations(admin_pb2.ListBulkOperationsRequest(page_size=100), metadata=admin_a)
    patterns = {o.filter.namespace_pattern for o in listed.operations}
    assert f"tenant-a/{ns}/*" in patterns and all(p.startswith("tenant-a/") for p in patterns)
    everyone = await stub.ListBulkOperations(admin_pb2.ListBulkOperationsRequest(page_size=100), metadata=root)
    assert theirs.operation.id in {o.id for o in everyone.operations}


async def test_a_ledger_write_holding_the_events_key_share_does_not_make_a_chunk_skip_it(
    server: RunningServer, inbox: InboxServiceStub, admin: InboxAdminServiceStub, migrated_url: str, ns: str
) -> None:
    """A late outcome of an older claim locks the event FOR KEY SHARE; the chunk's lock does not conflict with it."""
    keys = await dead_letters(inbox, ns, 3)
    started = await start(admin, ns)
    async with await psycopg.AsyncConnection.connect(migrated_url) as other:
        await other.execute(
            "SELECT 1 FROM inbox_events WHERE namespace = %s AND event_key = %s FOR KEY SHARE", (ns, keys[1])
        )
        await carry(server, started.operation.id)
        await other.rollback()
    ended = await get(admin, started.operation.id)
    assert (ended.state, ended.done, ended.skipped) == (DONE, 3, 0)
