"""Protobuf -> the operators' acts (SettleAction, EndClaim, Discard); the domain values check their own fields."""

from __future__ import annotations

from inboxd.api.admin_convert import EVENT_STATE_FROM_PROTO
from inboxd.api.convert import ACTION_STATE_FROM_PROTO
from inboxd.domain.errors import InvalidArgument
from inboxd.domain.operator_actions import ClaimEnding, Discarding, Settlement
from inboxd.domain.vocabulary import ActionState, EventState, FencingToken
from inboxd_client.v1 import admin_pb2, types_pb2


def _action_state(field: str, value: types_pb2.ActionState) -> ActionState:
    state = ACTION_STATE_FROM_PROTO.get(value)
    if state is None:
        raise InvalidArgument(field, f"is {value}, not a known ActionState")
    return state


def _event_state(field: str, value: types_pb2.EventState) -> EventState:
    state = EVENT_STATE_FROM_PROTO.get(value)
    if state is None:
        raise InvalidArgument(field, f"is {value}, not a known EventState")
    return state


def settlement(request: admin_pb2.SettleActionRequest) -> Settlement:
    return Settlement(
        namespace=request.namespace,
        event_key=request.event_key,
        action=request.action,
        outcome=_action_state("outcome", request.outcome),
        external_ref=request.external_ref,
        detail=request.detail,
        reason=request.reason,
        expected_state=_action_state("expected_state", request.expected_state),
        expected_fencing_token=FencingToken(request.expected_fencing_token),
    )


def claim_ending(request: admin_pb2.EndClaimRequest) -> ClaimEnding:
    return ClaimEnding(
        namespace=request.namespace,
        event_key=request.event_key,
        expected_fencing_token=FencingToken(request.expected_fencing_token),
        count_attempt=request.count_attempt,
        reason=request.reason,
    )


def discarding(request: admin_pb2.DiscardRequest) -> Discarding:
    return Discarding(
        namespace=request.namespace,
        event_key=request.event_key,
        expected_state=_event_state("expected_state", request.expected_state),
        reason=request.reason,
    )
