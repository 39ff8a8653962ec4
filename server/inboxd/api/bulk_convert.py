"""Protobuf <-> bulk operations' domain values (StartBulkOperation, Get, List, Cancel).

The request's enums are translated here (an unknown value is INVALID_ARGUMENT
naming its field); the domain checks the rest (`check_request`).
"""

from __future__ import annotations

from inboxd.api.admin_convert import EVENT_STATE_FROM_PROTO, summary_to_proto
from inboxd.api.convert import EVENT_STATE_TO_PROTO, instant_from_proto, instant_to_proto
from inboxd.domain.bulk_operations import (
    DEFAULT_STATES,
    BulkAction,
    BulkFilter,
    BulkOperation,
    BulkPage,
    BulkPosition,
    BulkRequest,
    BulkState,
    decode_bulk_page_token,
    encode_bulk_page_token,
    page_size,
)
from inboxd.domain.errors import InvalidArgument
from inboxd.domain.vocabulary import EventState
from inboxd.usecases.bulk_operations import BulkStarted
from inboxd_client.v1 import admin_pb2

ACTION_FROM_PROTO = {
    admin_pb2.BULK_ACTION_REPLAY: BulkAction.REPLAY,
    admin_pb2.BULK_ACTION_IGNORE: BulkAction.IGNORE,
    admin_pb2.BULK_ACTION_COPY: BulkAction.COPY,
}
ACTION_TO_PROTO = {action: proto for proto, action in ACTION_FROM_PROTO.items()}
STATE_TO_PROTO = {
    BulkState.RUNNING: admin_pb2.BULK_OPERATION_STATE_RUNNING,
    BulkState.DONE: admin_pb2.BULK_OPERATION_STATE_DONE,
    BulkState.CANCELLED: admin_pb2.BULK_OPERATION_STATE_CANCELLED,
    BulkState.FAILED: admin_pb2.BULK_OPERATION_STATE_FAILED,
}


def _states(f: admin_pb2.BulkFilter, action: BulkAction) -> tuple[EventState, ...]:
    states: list[EventState] = []
    for i, value in enumerate(f.states):
        state = EVENT_STATE_FROM_PROTO.get(value)
        if state is None:
            raise InvalidArgument(f"filter.states[{i}]", f"{value} is not a known EventState")
        states.append(state)
    # COPY copies an event whatever its state; the others act on dead letters unless told.
    return tuple(dict.fromkeys(states)) or (tuple(EventState) if action is BulkAction.COPY else DEFAULT_STATES)


def bulk_request(request: admin_pb2.StartBulkOperationRequest) -> BulkRequest:
    action = ACTION_FROM_PROTO.get(request.action)
    if action is None:
        raise InvalidArgument("action", "is required: BULK_ACTION_REPLAY, BULK_ACTION_IGNORE or BULK_ACTION_COPY")
    f = request.filter
    return BulkRequest(
        filter=BulkFilter(
            namespace_pattern=f.namespace_pattern,
            event_types=tuple(f.event_types),
            states=_states(f, action),
            accepted_from=instant_from_proto("filter.accepted_from", f.accepted_from)
            if f.HasField("accepted_from")
            else None,
            accepted_until=instant_from_proto("filter.accepted_until", f.accepted_until)
            if f.HasField("accepted_until")
            else None,
            error_contains=f.error_contains,
            ordering_key=f.ordering_key,
        ),
        action=action,
        reason=request.reason,
        rate=request.rate,
        dry_run=request.dry_run,
        subscription=request.subscription,
    )


def listing(request: admin_pb2.ListBulkOperationsRequest) -> tuple[BulkPosition | None, int]:
    size = page_size(request.page_size)
    return (decode_bulk_page_token(request.page_token) if request.page_token else None), size


def _filter_to_proto(f: BulkFilter) -> admin_pb2.BulkFilter:
    out = admin_pb2.BulkFilter(
        namespace_pattern=f.namespace_pattern,
        event_types=list(f.event_types),
        states=[EVENT_STATE_TO_PROTO[s] for s in f.states],
        error_contains=f.error_contains,
        ordering_key=f.ordering_key,
    )
    if f.accepted_from is not None:
        out.accepted_from.CopyFrom(instant_to_proto(f.accepted_from))
    if f.accepted_until is not None:
        out.accepted_until.CopyFrom(instant_to_proto(f.accepted_until))
    return out


def operation_to_proto(op: BulkOperation) -> admin_pb2.BulkOperation:
    out = admin_pb2.BulkOperation(
        id=str(op.id),
        filter=_filter_to_proto(op.filter),
        action=ACTION_TO_PROTO[op.action],
        reason=op.reason,
        rate=op.rate,
        dry_run=op.dry_run,
        state=STATE_TO_PROTO[op.state],
        matched=op.matched,
        done=op.done,
        skipped=op.skipped,
        actor=op.actor,
        started_at=instant_to_proto(op.started_at),
        cancelled_by=op.cancelled_by,
        error=op.error,
        measured_rate=op.measured_rate,
        subscription=op.subscription,
    )
    if op.finished_at is not None:
        out.finished_at.CopyFrom(instant_to_proto(op.finished_at))
    return out


def start_response(started: BulkStarted) -> admin_pb2.StartBulkOperationResponse:
    return admin_pb2.StartBulkOperationResponse(
        operation=operation_to_proto(started.operation),
        first_matches=[summary_to_proto(s) for s in started.first_matches],
    )


def list_response(page: BulkPage) -> admin_pb2.ListBulkOperationsResponse:
    return admin_pb2.ListBulkOperationsResponse(
        operations=[operation_to_proto(op) for op in page.operations],
        next_page_token=encode_bulk_page_token(page.next_position) if page.next_position else "",
    )
