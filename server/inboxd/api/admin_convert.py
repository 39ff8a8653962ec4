"""Protobuf <-> operator records, for InboxAdminService."""

from __future__ import annotations

from inboxd.api.convert import (
    ACTION_STATE_TO_PROTO,
    EVENT_STATE_TO_PROTO,
    action_record_to_proto,
    duration_to_proto,
    instant_to_proto,
)
from inboxd.api.destinations_convert import attempt_to_proto
from inboxd.domain import validation
from inboxd.domain.conflict_copies import (
    DEFAULT_CONFLICTS_PAGE,
    ConflictOverflow,
    ConflictWindow,
    decode_conflicts_token,
    encode_conflicts_token,
)
from inboxd.domain.errors import InvalidArgument
from inboxd.domain.operator_actions import OperatorActionKind, OperatorActionRecord
from inboxd.domain.operator_views import (
    ActionHistoryEntry,
    ClaimRecord,
    ConflictingCopy,
    EventRecord,
    EventSummary,
    ListPosition,
    NamespaceStats,
)
from inboxd.domain.operator_views import ReplayRecord as ReplayEntry
from inboxd.domain.page_tokens import decode_page_token
from inboxd.domain.vocabulary import Disposition, EventState
from inboxd_client.v1 import admin_pb2, types_pb2

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000

EVENT_STATE_FROM_PROTO = {proto: state for state, proto in EVENT_STATE_TO_PROTO.items()}
DISPOSITION_TO_PROTO = {
    Disposition.APPLIED: types_pb2.DISPOSITION_APPLIED,
    Disposition.IGNORED: types_pb2.DISPOSITION_IGNORED,
}


# Every request that names one event (and, for an act, says why).
EventRequest = (
    admin_pb2.GetEventRequest
    | admin_pb2.ReplayRequest
    | admin_pb2.SettleActionRequest
    | admin_pb2.EndClaimRequest
    | admin_pb2.DiscardRequest
)
ActRequest = (
    admin_pb2.ReplayRequest | admin_pb2.SettleActionRequest | admin_pb2.EndClaimRequest | admin_pb2.DiscardRequest
)


def event_identity(request: EventRequest) -> tuple[str, str]:
    return (
        validation.check_identity("namespace", request.namespace),
        validation.check_identity("event_key", request.event_key),
    )


def replay_reason(request: ActRequest) -> str:
    """The reason an operator's act needs, for the audit trail (Replay's, and the others')."""
    return validation.required_reason(request.reason)


def optional_namespace(request: admin_pb2.ListEventsRequest | admin_pb2.StatsRequest) -> str | None:
    """An empty namespace means every namespace."""
    if not request.namespace:
        return None
    return validation.check_identity("namespace", request.namespace)


def listing(request: admin_pb2.ListEventsRequest) -> tuple[tuple[EventState, ...] | None, ListPosition | None, int]:
    """(states or None for all, the position after which to list, page size), checked."""
    states: tuple[EventState, ...] | None = None
    if request.state != types_pb2.EVENT_STATE_UNSPECIFIED:
        state = EVENT_STATE_FROM_PROTO.get(request.state)
        if state is None:
            raise InvalidArgument("state", f"{request.state} is not a known EventState")
        states = (state,)
    page_size = request.page_size or DEFAULT_PAGE_SIZE
    if not 1 <= page_size <= MAX_PAGE_SIZE:
        raise InvalidArgument("page_size", f"is {request.page_size}; use 1 to {MAX_PAGE_SIZE} (0 means 100)")
    after = decode_page_token(request.page_token) if request.page_token else None
    return states, after, page_size


def summary_to_proto(summary: EventSummary) -> admin_pb2.EventSummary:
    out = admin_pb2.EventSummary(
        namespace=summary.namespace,
        event_key=summary.event_key,
        event_type=summary.event_type,
        state=EVENT_STATE_TO_PROTO[summary.state],
        attempt=summary.attempt,
        accepted_at=instant_to_proto(summary.accepted_at),
        available_at=instant_to_proto(summary.available_at),
        updated_at=instant_to_proto(summary.updated_at),
        last_error=summary.last_error,
        worker_id=summary.worker_id,
    )
    if summary.lease_expires_at is not None:
        out.lease_expires_at.CopyFrom(instant_to_proto(summary.lease_expires_at))
    return out


def _claim_to_proto(claim: ClaimRecord) -> admin_pb2.ClaimRecord:
    out = admin_pb2.ClaimRecord(
        fencing_token=claim.fencing_token,
        worker_id=claim.worker_id,
        attempt=claim.attempt,
        claimed_at=instant_to_proto(claim.claimed_at),
        outcome=claim.outcome,
    )
    if claim.ended_at is not None:
        out.ended_at.CopyFrom(instant_to_proto(claim.ended_at))
    return out


def conflicts_window(request: admin_pb2.GetEventRequest) -> ConflictWindow:
    """Which conflicting copies GetEvent answers, checked (0 means the default page)."""
    after = decode_conflicts_token(request.conflicts_page_token) if request.conflicts_page_token else 0
    size = request.conflicts_page_size or DEFAULT_CONFLICTS_PAGE
    return ConflictWindow(after_id=after, page_size=size, with_payloads=request.include_conflict_payloads)


def conflicts_next_page_token(record: EventRecord) -> str:
    after = record.conflicts_continue_after
    return "" if after is None else encode_conflicts_token(after)


def _conflict_to_proto(copy: ConflictingCopy) -> admin_pb2.ConflictingCopy:
    return admin_pb2.ConflictingCopy(
        event_type=copy.event_type,
        payload=copy.payload or b"",
        content_type=copy.content_type,
        metadata=copy.metadata,
        received_at=instant_to_proto(copy.received_at),
        payload_sha256=copy.payload_sha256 or b"",
        payload_size=copy.payload_bytes or 0,
    )


def _overflow_to_proto(overflow: ConflictOverflow) -> admin_pb2.ConflictOverflow:
    return admin_pb2.ConflictOverflow(
        copies=overflow.copies,
        first_received_at=instant_to_proto(overflow.first_received_at),
        last_received_at=instant_to_proto(overflow.last_received_at),
        last_payload_sha256=overflow.last_payload_sha256,
    )


def _replay_to_proto(replay: ReplayEntry) -> admin_pb2.ReplayRecord:
    return admin_pb2.ReplayRecord(
        actor=replay.actor,
        reason=replay.reason,
        state_before=EVENT_STATE_TO_PROTO[replay.state_before],
        replayed_at=instant_to_proto(replay.replayed_at),
    )


OPERATOR_ACTION_KIND_TO_PROTO = {
    OperatorActionKind.SETTLE_ACTION: admin_pb2.OPERATOR_ACTION_KIND_SETTLE_ACTION,
    OperatorActionKind.END_CLAIM: admin_pb2.OPERATOR_ACTION_KIND_END_CLAIM,
    OperatorActionKind.DISCARD: admin_pb2.OPERATOR_ACTION_KIND_DISCARD,
}


def _operator_action_to_proto(act: OperatorActionRecord) -> admin_pb2.OperatorActionRecord:
    return admin_pb2.OperatorActionRecord(
        kind=OPERATOR_ACTION_KIND_TO_PROTO[act.kind],
        actor=act.actor,
        reason=act.reason,
        acted_at=instant_to_proto(act.acted_at),
        subject=act.subject,
        before=act.before,
        after=act.after,
    )


def _history_to_proto(entry: ActionHistoryEntry) -> admin_pb2.ActionHistoryEntry:
    return admin_pb2.ActionHistoryEntry(
        action=entry.action,
        state=ACTION_STATE_TO_PROTO[entry.state],
        external_ref=entry.external_ref,
        detail=entry.detail,
        fencing_token=entry.fencing_token,
        applied=entry.applied,
        recorded_at=instant_to_proto(entry.recorded_at),
    )


def event_to_proto(record: EventRecord) -> admin_pb2.Event:
    out = admin_pb2.Event(
        summary=summary_to_proto(record.summary),
        payload=record.payload or b"",
        content_type=record.content_type,
        metadata=record.metadata,
        message_id=record.message_id,
        ordering_key=record.ordering_key,
        revision=record.revision,
        disposition=DISPOSITION_TO_PROTO[record.disposition] if record.disposition else None,
        disposition_reason=record.disposition_reason,
        actions=[action_record_to_proto(a) for a in record.actions],
        conflicts=[_conflict_to_proto(c) for c in record.conflicts],
        claims=[_claim_to_proto(c) for c in record.claims],
        replays=[_replay_to_proto(r) for r in record.replays],
        action_history=[_history_to_proto(h) for h in record.action_history],
        conflict_count=record.conflict_count,
        operator_actions=[_operator_action_to_proto(a) for a in record.operator_actions],
        blocked_by_event_key=record.blocked_by or "",
        deliveries=[attempt_to_proto(a) for a in record.deliveries],
    )
    if record.conflicts_overflow is not None:
        out.conflicts_overflow.CopyFrom(_overflow_to_proto(record.conflicts_overflow))
    if record.lease_expires_at is not None:
        out.lease_expires_at.CopyFrom(instant_to_proto(record.lease_expires_at))
    if record.completed_at is not None:
        out.completed_at.CopyFrom(instant_to_proto(record.completed_at))
    return out


def stats_to_proto(stats: NamespaceStats) -> admin_pb2.NamespaceStats:
    out = admin_pb2.NamespaceStats(
        namespace=stats.namespace,
        pending=stats.pending,
        processing=stats.processing,
        completed=stats.completed,
        dead_lettered=stats.dead_lettered,
        unresolved_actions=stats.unresolved_actions,
        blocked_ordering_keys=stats.blocked_ordering_keys,
        connected_workers=stats.connected_workers,
        paused=stats.paused,
        flow_rule=stats.flow_rule,
    )
    if stats.oldest_claimable_age is not None:
        out.oldest_claimable_age.CopyFrom(duration_to_proto(stats.oldest_claimable_age))
    if stats.oldest_blocked_age is not None:
        out.oldest_blocked_age.CopyFrom(duration_to_proto(stats.oldest_blocked_age))
    return out
