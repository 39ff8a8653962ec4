"""Protobuf <-> domain: field checks, timestamps, enums."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp
from inboxd_client.v1 import inbox_pb2, types_pb2

from inboxd import validation
from inboxd.domain import AcceptOutcome, AcceptResult, EventKey, EventState, Namespace, NewEvent
from inboxd.errors import InvalidArgument

# google.protobuf.Timestamp's documented range: 0001-01-01 to 9999-12-31.
_MIN_SECONDS = -62135596800
_MAX_SECONDS = 253402300799

EVENT_STATE_TO_PROTO = {
    EventState.PENDING: types_pb2.EVENT_STATE_PENDING,
    EventState.PROCESSING: types_pb2.EVENT_STATE_PROCESSING,
    EventState.COMPLETED: types_pb2.EVENT_STATE_COMPLETED,
    EventState.DEAD_LETTERED: types_pb2.EVENT_STATE_DEAD_LETTERED,
}
ACCEPT_OUTCOME_TO_PROTO = {
    AcceptOutcome.ACCEPTED: inbox_pb2.ACCEPT_OUTCOME_ACCEPTED,
    AcceptOutcome.DUPLICATE: inbox_pb2.ACCEPT_OUTCOME_DUPLICATE,
    AcceptOutcome.CONFLICT: inbox_pb2.ACCEPT_OUTCOME_CONFLICT,
}


def instant_from_proto(field: str, ts: Timestamp) -> datetime:
    if not _MIN_SECONDS <= ts.seconds <= _MAX_SECONDS:
        raise InvalidArgument(field, f"seconds={ts.seconds} is outside 0001-01-01..9999-12-31")
    if not 0 <= ts.nanos < 1_000_000_000:
        raise InvalidArgument(field, f"nanos={ts.nanos} is outside 0..999999999")
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=ts.seconds, microseconds=ts.nanos // 1000)


def instant_to_proto(value: datetime) -> Timestamp:
    ts = Timestamp()
    ts.FromDatetime(value.astimezone(UTC))
    return ts


def duration_from_proto(field: str, value: Duration) -> timedelta:
    if not -315_576_000_000 <= value.seconds <= 315_576_000_000 or not -999_999_999 <= value.nanos <= 999_999_999:
        raise InvalidArgument(field, "is outside google.protobuf.Duration's range")
    if (value.seconds > 0 and value.nanos < 0) or (value.seconds < 0 and value.nanos > 0):
        raise InvalidArgument(field, "has seconds and nanos of opposite signs")
    return timedelta(seconds=value.seconds, microseconds=value.nanos / 1000)


def duration_to_proto(value: timedelta) -> Duration:
    out = Duration()
    out.FromTimedelta(value)
    return out


def new_event(request: inbox_pb2.AcceptRequest, max_payload_bytes: int) -> NewEvent:
    """Checks an AcceptRequest field by field; raises InvalidArgument naming the first bad one."""
    return NewEvent(
        namespace=Namespace(validation.check_identity("namespace", request.namespace)),
        event_key=EventKey(validation.check_identity("event_key", request.event_key)),
        event_type=validation.check_identity("event_type", request.event_type),
        payload_json=validation.check_payload("payload", request.payload, max_payload_bytes),
        metadata=validation.check_metadata("metadata", request.metadata),
        message_id=validation.check_text("message_id", request.message_id, validation.MAX_IDENTITY_BYTES),
        ordering_key=validation.check_text("ordering_key", request.ordering_key, validation.MAX_IDENTITY_BYTES),
        revision=request.revision,
        available_at=(
            instant_from_proto("available_at", request.available_at) if request.HasField("available_at") else None
        ),
    )


def accept_response(result: AcceptResult) -> inbox_pb2.AcceptResponse:
    return inbox_pb2.AcceptResponse(
        outcome=ACCEPT_OUTCOME_TO_PROTO[result.outcome],
        state=EVENT_STATE_TO_PROTO[result.state],
        accepted_at=instant_to_proto(result.accepted_at),
    )
