"""Protobuf -> the operators' acts (SettleAction, EndClaim, Discard), checked field by field."""

from __future__ import annotations

from inboxd.api.admin_convert import EVENT_STATE_FROM_PROTO, event_identity, replay_reason
from inboxd.api.convert import ACTION_STATE_FROM_PROTO
from inboxd.domain import validation
from inboxd.domain.errors import InvalidArgument
from inboxd.domain.operator_actions import (
    DISCARDABLE,
    SETTLEABLE,
    SETTLED_OUTCOMES,
    ClaimEnding,
    Discarding,
    Settlement,
)
from inboxd.domain.vocabulary import ActionState, EventState, FencingToken
from inboxd_client.v1 import admin_pb2, types_pb2


def _one_of(field: str, value: types_pb2.ActionState, allowed: frozenset[ActionState]) -> ActionState:
    state = ACTION_STATE_FROM_PROTO.get(value)
    if state is None or state not in allowed:
        names = " or ".join(sorted(f"ACTION_STATE_{s.name}" for s in allowed))
        raise InvalidArgument(field, f"is {value}; use {names}")
    return state


def _fencing_token(field: str, value: int) -> FencingToken:
    if value <= 0:
        raise InvalidArgument(
            field, "is required: the fencing token you saw (GetEvent shows it), so a view that moved on is refused"
        )
    return FencingToken(value)


def settlement(request: admin_pb2.SettleActionRequest) -> Settlement:
    namespace, event_key = event_identity(request)
    return Settlement(
        namespace=namespace,
        event_key=event_key,
        action=validation.check_identity("action", request.action),
        outcome=_one_of("outcome", request.outcome, SETTLED_OUTCOMES),
        external_ref=validation.check_text("external_ref", request.external_ref, validation.MAX_TEXT_BYTES),
        detail=validation.check_text("detail", request.detail, validation.MAX_TEXT_BYTES),
        reason=replay_reason(request),
        expected_state=_one_of("expected_state", request.expected_state, SETTLEABLE),
        expected_fencing_token=_fencing_token("expected_fencing_token", request.expected_fencing_token),
    )


def claim_ending(request: admin_pb2.EndClaimRequest) -> ClaimEnding:
    namespace, event_key = event_identity(request)
    return ClaimEnding(
        namespace=namespace,
        event_key=event_key,
        expected_fencing_token=_fencing_token("expected_fencing_token", request.expected_fencing_token),
        count_attempt=request.count_attempt,
        reason=replay_reason(request),
    )


def discarding(request: admin_pb2.DiscardRequest) -> Discarding:
    namespace, event_key = event_identity(request)
    state = EVENT_STATE_FROM_PROTO.get(request.expected_state)
    if state is None or state not in DISCARDABLE:
        raise InvalidArgument(
            "expected_state",
            f"is {request.expected_state}; use EVENT_STATE_PENDING or EVENT_STATE_DEAD_LETTERED (the state you saw)",
        )
    return Discarding(
        namespace=namespace, event_key=event_key, expected_state=EventState(state), reason=replay_reason(request)
    )
