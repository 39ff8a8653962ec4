import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from . import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OperatorActionKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OPERATOR_ACTION_KIND_UNSPECIFIED: _ClassVar[OperatorActionKind]
    OPERATOR_ACTION_KIND_SETTLE_ACTION: _ClassVar[OperatorActionKind]
    OPERATOR_ACTION_KIND_END_CLAIM: _ClassVar[OperatorActionKind]
    OPERATOR_ACTION_KIND_DISCARD: _ClassVar[OperatorActionKind]

class BulkAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BULK_ACTION_UNSPECIFIED: _ClassVar[BulkAction]
    BULK_ACTION_REPLAY: _ClassVar[BulkAction]
    BULK_ACTION_IGNORE: _ClassVar[BulkAction]
    BULK_ACTION_COPY: _ClassVar[BulkAction]

class BulkOperationState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BULK_OPERATION_STATE_UNSPECIFIED: _ClassVar[BulkOperationState]
    BULK_OPERATION_STATE_RUNNING: _ClassVar[BulkOperationState]
    BULK_OPERATION_STATE_DONE: _ClassVar[BulkOperationState]
    BULK_OPERATION_STATE_CANCELLED: _ClassVar[BulkOperationState]
    BULK_OPERATION_STATE_FAILED: _ClassVar[BulkOperationState]

class DestinationState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DESTINATION_STATE_UNSPECIFIED: _ClassVar[DestinationState]
    DESTINATION_STATE_ACTIVE: _ClassVar[DestinationState]
    DESTINATION_STATE_PAUSED: _ClassVar[DestinationState]
OPERATOR_ACTION_KIND_UNSPECIFIED: OperatorActionKind
OPERATOR_ACTION_KIND_SETTLE_ACTION: OperatorActionKind
OPERATOR_ACTION_KIND_END_CLAIM: OperatorActionKind
OPERATOR_ACTION_KIND_DISCARD: OperatorActionKind
BULK_ACTION_UNSPECIFIED: BulkAction
BULK_ACTION_REPLAY: BulkAction
BULK_ACTION_IGNORE: BulkAction
BULK_ACTION_COPY: BulkAction
BULK_OPERATION_STATE_UNSPECIFIED: BulkOperationState
BULK_OPERATION_STATE_RUNNING: BulkOperationState
BULK_OPERATION_STATE_DONE: BulkOperationState
BULK_OPERATION_STATE_CANCELLED: BulkOperationState
BULK_OPERATION_STATE_FAILED: BulkOperationState
DESTINATION_STATE_UNSPECIFIED: DestinationState
DESTINATION_STATE_ACTIVE: DestinationState
DESTINATION_STATE_PAUSED: DestinationState

class GetEventRequest(_message.Message):
    __slots__ = ("namespace", "event_key", "conflicts_page_size", "conflicts_page_token", "include_conflict_payloads")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    EVENT_KEY_FIELD_NUMBER: _ClassVar[int]
    CONFLICTS_PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    CONFLICTS_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_CONFLICT_PAYLOADS_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    event_key: str
    conflicts_page_size: int
    conflicts_page_token: str
    include_conflict_payloads: bool
    def __init__(self, namespace: _Optional[str] = ..., event_key: _Optional[str] = ..., conflicts_page_size: _Optional[int] = ..., conflicts_page_token: _Optional[str] = ..., include_conflict_payloads: _Optional[bool] = ...) -> None: ...

class GetEventResponse(_message.Message):
    __slots__ = ("event", "conflicts_next_page_token")
    EVENT_FIELD_NUMBER: _ClassVar[int]
    CONFLICTS_NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    event: Event
    conflicts_next_page_token: str
    def __init__(self, event: _Optional[_Union[Event, _Mapping]] = ..., conflicts_next_page_token: _Optional[str] = ...) -> None: ...

class ListEventsRequest(_message.Message):
    __slots__ = ("namespace", "state", "page_size", "page_token")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    state: _types_pb2.EventState
    page_size: int
    page_token: str
    def __init__(self, namespace: _Optional[str] = ..., state: _Optional[_Union[_types_pb2.EventState, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListEventsResponse(_message.Message):
    __slots__ = ("events", "next_page_token")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[EventSummary]
    next_page_token: str
    def __init__(self, events: _Optional[_Iterable[_Union[EventSummary, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ReplayRequest(_message.Message):
    __slots__ = ("namespace", "event_key", "reason")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    EVENT_KEY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    event_key: str
    reason: str
    def __init__(self, namespace: _Optional[str] = ..., event_key: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ReplayResponse(_message.Message):
    __slots__ = ("event",)
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: Event
    def __init__(self, event: _Optional[_Union[Event, _Mapping]] = ...) -> None: ...

class SettleActionRequest(_message.Message):
    __slots__ = ("namespace", "event_key", "action", "outcome", "external_ref", "detail", "reason", "expected_state", "expected_fencing_token")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    EVENT_KEY_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    EXTERNAL_REF_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_STATE_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    event_key: str
    action: str
    outcome: _types_pb2.ActionState
    external_ref: str
    detail: str
    reason: str
    expected_state: _types_pb2.ActionState
    expected_fencing_token: int
    def __init__(self, namespace: _Optional[str] = ..., event_key: _Optional[str] = ..., action: _Optional[str] = ..., outcome: _Optional[_Union[_types_pb2.ActionState, str]] = ..., external_ref: _Optional[str] = ..., detail: _Optional[str] = ..., reason: _Optional[str] = ..., expected_state: _Optional[_Union[_types_pb2.ActionState, str]] = ..., expected_fencing_token: _Optional[int] = ...) -> None: ...

class SettleActionResponse(_message.Message):
    __slots__ = ("event",)
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: Event
    def __init__(self, event: _Optional[_Union[Event, _Mapping]] = ...) -> None: ...

class EndClaimRequest(_message.Message):
    __slots__ = ("namespace", "event_key", "expected_fencing_token", "count_attempt", "reason")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    EVENT_KEY_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    COUNT_ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    event_key: str
    expected_fencing_token: int
    count_attempt: bool
    reason: str
    def __init__(self, namespace: _Optional[str] = ..., event_key: _Optional[str] = ..., expected_fencing_token: _Optional[int] = ..., count_attempt: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class EndClaimResponse(_message.Message):
    __slots__ = ("event",)
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: Event
    def __init__(self, event: _Optional[_Union[Event, _Mapping]] = ...) -> None: ...

class DiscardRequest(_message.Message):
    __slots__ = ("namespace", "event_key", "expected_state", "reason")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    EVENT_KEY_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_STATE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    event_key: str
    expected_state: _types_pb2.EventState
    reason: str
    def __init__(self, namespace: _Optional[str] = ..., event_key: _Optional[str] = ..., expected_state: _Optional[_Union[_types_pb2.EventState, str]] = ..., reason: _Optional[str] = ...) -> None: ...

class DiscardResponse(_message.Message):
    __slots__ = ("event",)
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: Event
    def __init__(self, event: _Optional[_Union[Event, _Mapping]] = ...) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = ("namespace",)
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    def __init__(self, namespace: _Optional[str] = ...) -> None: ...

class StatsResponse(_message.Message):
    __slots__ = ("namespaces",)
    NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    namespaces: _containers.RepeatedCompositeFieldContainer[NamespaceStats]
    def __init__(self, namespaces: _Optional[_Iterable[_Union[NamespaceStats, _Mapping]]] = ...) -> None: ...

class NamespaceStats(_message.Message):
    __slots__ = ("namespace", "pending", "processing", "completed", "dead_lettered", "oldest_claimable_age", "unresolved_actions", "blocked_ordering_keys", "oldest_blocked_age", "connected_workers", "paused", "flow_rule")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    PROCESSING_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTERED_FIELD_NUMBER: _ClassVar[int]
    OLDEST_CLAIMABLE_AGE_FIELD_NUMBER: _ClassVar[int]
    UNRESOLVED_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    BLOCKED_ORDERING_KEYS_FIELD_NUMBER: _ClassVar[int]
    OLDEST_BLOCKED_AGE_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_WORKERS_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    FLOW_RULE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    pending: int
    processing: int
    completed: int
    dead_lettered: int
    oldest_claimable_age: _duration_pb2.Duration
    unresolved_actions: int
    blocked_ordering_keys: int
    oldest_blocked_age: _duration_pb2.Duration
    connected_workers: int
    paused: bool
    flow_rule: str
    def __init__(self, namespace: _Optional[str] = ..., pending: _Optional[int] = ..., processing: _Optional[int] = ..., completed: _Optional[int] = ..., dead_lettered: _Optional[int] = ..., oldest_claimable_age: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., unresolved_actions: _Optional[int] = ..., blocked_ordering_keys: _Optional[int] = ..., oldest_blocked_age: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., connected_workers: _Optional[int] = ..., paused: _Optional[bool] = ..., flow_rule: _Optional[str] = ...) -> None: ...

class EventSummary(_message.Message):
    __slots__ = ("namespace", "event_key", "event_type", "state", "attempt", "accepted_at", "available_at", "updated_at", "last_error", "worker_id", "lease_expires_at")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    EVENT_KEY_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_AT_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    event_key: str
    event_type: str
    state: _types_pb2.EventState
    attempt: int
    accepted_at: _timestamp_pb2.Timestamp
    available_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    last_error: str
    worker_id: str
    lease_expires_at: _timestamp_pb2.Timestamp
    def __init__(self, namespace: _Optional[str] = ..., event_key: _Optional[str] = ..., event_type: _Optional[str] = ..., state: _Optional[_Union[_types_pb2.EventState, str]] = ..., attempt: _Optional[int] = ..., accepted_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., available_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_error: _Optional[str] = ..., worker_id: _Optional[str] = ..., lease_expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("summary", "payload", "metadata", "message_id", "ordering_key", "revision", "disposition", "disposition_reason", "lease_expires_at", "completed_at", "actions", "conflicts", "claims", "replays", "action_history", "conflict_count", "conflicts_overflow", "operator_actions", "blocked_by_event_key", "content_type", "deliveries")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    ORDERING_KEY_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    DISPOSITION_FIELD_NUMBER: _ClassVar[int]
    DISPOSITION_REASON_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_AT_FIELD_NUMBER: _ClassVar[int]
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    CONFLICTS_FIELD_NUMBER: _ClassVar[int]
    CLAIMS_FIELD_NUMBER: _ClassVar[int]
    REPLAYS_FIELD_NUMBER: _ClassVar[int]
    ACTION_HISTORY_FIELD_NUMBER: _ClassVar[int]
    CONFLICT_COUNT_FIELD_NUMBER: _ClassVar[int]
    CONFLICTS_OVERFLOW_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    BLOCKED_BY_EVENT_KEY_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    summary: EventSummary
    payload: bytes
    metadata: _containers.ScalarMap[str, str]
    message_id: str
    ordering_key: str
    revision: int
    disposition: _types_pb2.Disposition
    disposition_reason: str
    lease_expires_at: _timestamp_pb2.Timestamp
    completed_at: _timestamp_pb2.Timestamp
    actions: _containers.RepeatedCompositeFieldContainer[_types_pb2.ActionRecord]
    conflicts: _containers.RepeatedCompositeFieldContainer[ConflictingCopy]
    claims: _containers.RepeatedCompositeFieldContainer[ClaimRecord]
    replays: _containers.RepeatedCompositeFieldContainer[ReplayRecord]
    action_history: _containers.RepeatedCompositeFieldContainer[ActionHistoryEntry]
    conflict_count: int
    conflicts_overflow: ConflictOverflow
    operator_actions: _containers.RepeatedCompositeFieldContainer[OperatorActionRecord]
    blocked_by_event_key: str
    content_type: str
    deliveries: _containers.RepeatedCompositeFieldContainer[DeliveryAttempt]
    def __init__(self, summary: _Optional[_Union[EventSummary, _Mapping]] = ..., payload: _Optional[bytes] = ..., metadata: _Optional[_Mapping[str, str]] = ..., message_id: _Optional[str] = ..., ordering_key: _Optional[str] = ..., revision: _Optional[int] = ..., disposition: _Optional[_Union[_types_pb2.Disposition, str]] = ..., disposition_reason: _Optional[str] = ..., lease_expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., completed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., actions: _Optional[_Iterable[_Union[_types_pb2.ActionRecord, _Mapping]]] = ..., conflicts: _Optional[_Iterable[_Union[ConflictingCopy, _Mapping]]] = ..., claims: _Optional[_Iterable[_Union[ClaimRecord, _Mapping]]] = ..., replays: _Optional[_Iterable[_Union[ReplayRecord, _Mapping]]] = ..., action_history: _Optional[_Iterable[_Union[ActionHistoryEntry, _Mapping]]] = ..., conflict_count: _Optional[int] = ..., conflicts_overflow: _Optional[_Union[ConflictOverflow, _Mapping]] = ..., operator_actions: _Optional[_Iterable[_Union[OperatorActionRecord, _Mapping]]] = ..., blocked_by_event_key: _Optional[str] = ..., content_type: _Optional[str] = ..., deliveries: _Optional[_Iterable[_Union[DeliveryAttempt, _Mapping]]] = ...) -> None: ...

class OperatorActionRecord(_message.Message):
    __slots__ = ("kind", "actor", "reason", "acted_at", "subject", "before", "after")
    KIND_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ACTED_AT_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    kind: OperatorActionKind
    actor: str
    reason: str
    acted_at: _timestamp_pb2.Timestamp
    subject: str
    before: str
    after: str
    def __init__(self, kind: _Optional[_Union[OperatorActionKind, str]] = ..., actor: _Optional[str] = ..., reason: _Optional[str] = ..., acted_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., subject: _Optional[str] = ..., before: _Optional[str] = ..., after: _Optional[str] = ...) -> None: ...

class ConflictOverflow(_message.Message):
    __slots__ = ("copies", "first_received_at", "last_received_at", "last_payload_sha256")
    COPIES_FIELD_NUMBER: _ClassVar[int]
    FIRST_RECEIVED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_RECEIVED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_PAYLOAD_SHA256_FIELD_NUMBER: _ClassVar[int]
    copies: int
    first_received_at: _timestamp_pb2.Timestamp
    last_received_at: _timestamp_pb2.Timestamp
    last_payload_sha256: bytes
    def __init__(self, copies: _Optional[int] = ..., first_received_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_received_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_payload_sha256: _Optional[bytes] = ...) -> None: ...

class ActionHistoryEntry(_message.Message):
    __slots__ = ("action", "state", "external_ref", "detail", "fencing_token", "applied", "recorded_at")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EXTERNAL_REF_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    RECORDED_AT_FIELD_NUMBER: _ClassVar[int]
    action: str
    state: _types_pb2.ActionState
    external_ref: str
    detail: str
    fencing_token: int
    applied: bool
    recorded_at: _timestamp_pb2.Timestamp
    def __init__(self, action: _Optional[str] = ..., state: _Optional[_Union[_types_pb2.ActionState, str]] = ..., external_ref: _Optional[str] = ..., detail: _Optional[str] = ..., fencing_token: _Optional[int] = ..., applied: _Optional[bool] = ..., recorded_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ConflictingCopy(_message.Message):
    __slots__ = ("event_type", "payload", "metadata", "received_at", "payload_sha256", "payload_size", "content_type")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_AT_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_SHA256_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_SIZE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    event_type: str
    payload: bytes
    metadata: _containers.ScalarMap[str, str]
    received_at: _timestamp_pb2.Timestamp
    payload_sha256: bytes
    payload_size: int
    content_type: str
    def __init__(self, event_type: _Optional[str] = ..., payload: _Optional[bytes] = ..., metadata: _Optional[_Mapping[str, str]] = ..., received_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., payload_sha256: _Optional[bytes] = ..., payload_size: _Optional[int] = ..., content_type: _Optional[str] = ...) -> None: ...

class ClaimRecord(_message.Message):
    __slots__ = ("fencing_token", "worker_id", "attempt", "claimed_at", "ended_at", "outcome")
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    CLAIMED_AT_FIELD_NUMBER: _ClassVar[int]
    ENDED_AT_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    fencing_token: int
    worker_id: str
    attempt: int
    claimed_at: _timestamp_pb2.Timestamp
    ended_at: _timestamp_pb2.Timestamp
    outcome: str
    def __init__(self, fencing_token: _Optional[int] = ..., worker_id: _Optional[str] = ..., attempt: _Optional[int] = ..., claimed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., ended_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., outcome: _Optional[str] = ...) -> None: ...

class ReplayRecord(_message.Message):
    __slots__ = ("actor", "reason", "state_before", "replayed_at")
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    STATE_BEFORE_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_AT_FIELD_NUMBER: _ClassVar[int]
    actor: str
    reason: str
    state_before: _types_pb2.EventState
    replayed_at: _timestamp_pb2.Timestamp
    def __init__(self, actor: _Optional[str] = ..., reason: _Optional[str] = ..., state_before: _Optional[_Union[_types_pb2.EventState, str]] = ..., replayed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class FlowRule(_message.Message):
    __slots__ = ("pattern", "max_in_flight", "rate", "burst", "paused", "weight", "resumed_at", "ramp", "ramp_rate", "updated_at", "updated_by")
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    MAX_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    BURST_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    RESUMED_AT_FIELD_NUMBER: _ClassVar[int]
    RAMP_FIELD_NUMBER: _ClassVar[int]
    RAMP_RATE_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_BY_FIELD_NUMBER: _ClassVar[int]
    pattern: str
    max_in_flight: int
    rate: float
    burst: int
    paused: bool
    weight: int
    resumed_at: _timestamp_pb2.Timestamp
    ramp: _duration_pb2.Duration
    ramp_rate: float
    updated_at: _timestamp_pb2.Timestamp
    updated_by: str
    def __init__(self, pattern: _Optional[str] = ..., max_in_flight: _Optional[int] = ..., rate: _Optional[float] = ..., burst: _Optional[int] = ..., paused: _Optional[bool] = ..., weight: _Optional[int] = ..., resumed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., ramp: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., ramp_rate: _Optional[float] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_by: _Optional[str] = ...) -> None: ...

class FlowControl(_message.Message):
    __slots__ = ("rule", "namespaces", "in_flight", "pending", "throttled_claims")
    RULE_FIELD_NUMBER: _ClassVar[int]
    NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    THROTTLED_CLAIMS_FIELD_NUMBER: _ClassVar[int]
    rule: FlowRule
    namespaces: int
    in_flight: int
    pending: int
    throttled_claims: int
    def __init__(self, rule: _Optional[_Union[FlowRule, _Mapping]] = ..., namespaces: _Optional[int] = ..., in_flight: _Optional[int] = ..., pending: _Optional[int] = ..., throttled_claims: _Optional[int] = ...) -> None: ...

class FlowControlChange(_message.Message):
    __slots__ = ("pattern", "actor", "reason", "changed_at", "before", "after")
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CHANGED_AT_FIELD_NUMBER: _ClassVar[int]
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    pattern: str
    actor: str
    reason: str
    changed_at: _timestamp_pb2.Timestamp
    before: str
    after: str
    def __init__(self, pattern: _Optional[str] = ..., actor: _Optional[str] = ..., reason: _Optional[str] = ..., changed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., before: _Optional[str] = ..., after: _Optional[str] = ...) -> None: ...

class SetFlowControlRequest(_message.Message):
    __slots__ = ("pattern", "max_in_flight", "rate", "burst", "paused", "weight", "resume_ramp", "ramp_rate", "remove", "reason")
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    MAX_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    BURST_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    RESUME_RAMP_FIELD_NUMBER: _ClassVar[int]
    RAMP_RATE_FIELD_NUMBER: _ClassVar[int]
    REMOVE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    pattern: str
    max_in_flight: int
    rate: float
    burst: int
    paused: bool
    weight: int
    resume_ramp: _duration_pb2.Duration
    ramp_rate: float
    remove: bool
    reason: str
    def __init__(self, pattern: _Optional[str] = ..., max_in_flight: _Optional[int] = ..., rate: _Optional[float] = ..., burst: _Optional[int] = ..., paused: _Optional[bool] = ..., weight: _Optional[int] = ..., resume_ramp: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., ramp_rate: _Optional[float] = ..., remove: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class SetFlowControlResponse(_message.Message):
    __slots__ = ("before", "after")
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    before: FlowRule
    after: FlowRule
    def __init__(self, before: _Optional[_Union[FlowRule, _Mapping]] = ..., after: _Optional[_Union[FlowRule, _Mapping]] = ...) -> None: ...

class GetFlowControlRequest(_message.Message):
    __slots__ = ("namespace",)
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    def __init__(self, namespace: _Optional[str] = ...) -> None: ...

class GetFlowControlResponse(_message.Message):
    __slots__ = ("control", "changes", "in_flight", "pending")
    CONTROL_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    control: FlowControl
    changes: _containers.RepeatedCompositeFieldContainer[FlowControlChange]
    in_flight: int
    pending: int
    def __init__(self, control: _Optional[_Union[FlowControl, _Mapping]] = ..., changes: _Optional[_Iterable[_Union[FlowControlChange, _Mapping]]] = ..., in_flight: _Optional[int] = ..., pending: _Optional[int] = ...) -> None: ...

class ListFlowControlsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListFlowControlsResponse(_message.Message):
    __slots__ = ("controls",)
    CONTROLS_FIELD_NUMBER: _ClassVar[int]
    controls: _containers.RepeatedCompositeFieldContainer[FlowControl]
    def __init__(self, controls: _Optional[_Iterable[_Union[FlowControl, _Mapping]]] = ...) -> None: ...

class BulkFilter(_message.Message):
    __slots__ = ("namespace_pattern", "event_types", "states", "accepted_from", "accepted_until", "error_contains", "ordering_key")
    NAMESPACE_PATTERN_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPES_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FROM_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_UNTIL_FIELD_NUMBER: _ClassVar[int]
    ERROR_CONTAINS_FIELD_NUMBER: _ClassVar[int]
    ORDERING_KEY_FIELD_NUMBER: _ClassVar[int]
    namespace_pattern: str
    event_types: _containers.RepeatedScalarFieldContainer[str]
    states: _containers.RepeatedScalarFieldContainer[_types_pb2.EventState]
    accepted_from: _timestamp_pb2.Timestamp
    accepted_until: _timestamp_pb2.Timestamp
    error_contains: str
    ordering_key: str
    def __init__(self, namespace_pattern: _Optional[str] = ..., event_types: _Optional[_Iterable[str]] = ..., states: _Optional[_Iterable[_Union[_types_pb2.EventState, str]]] = ..., accepted_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., accepted_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., error_contains: _Optional[str] = ..., ordering_key: _Optional[str] = ...) -> None: ...

class BulkOperation(_message.Message):
    __slots__ = ("id", "filter", "action", "reason", "rate", "dry_run", "state", "matched", "done", "skipped", "actor", "started_at", "finished_at", "cancelled_by", "error", "measured_rate", "subscription")
    ID_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    MATCHED_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_BY_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MEASURED_RATE_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_FIELD_NUMBER: _ClassVar[int]
    id: str
    filter: BulkFilter
    action: BulkAction
    reason: str
    rate: float
    dry_run: bool
    state: BulkOperationState
    matched: int
    done: int
    skipped: int
    actor: str
    started_at: _timestamp_pb2.Timestamp
    finished_at: _timestamp_pb2.Timestamp
    cancelled_by: str
    error: str
    measured_rate: float
    subscription: str
    def __init__(self, id: _Optional[str] = ..., filter: _Optional[_Union[BulkFilter, _Mapping]] = ..., action: _Optional[_Union[BulkAction, str]] = ..., reason: _Optional[str] = ..., rate: _Optional[float] = ..., dry_run: _Optional[bool] = ..., state: _Optional[_Union[BulkOperationState, str]] = ..., matched: _Optional[int] = ..., done: _Optional[int] = ..., skipped: _Optional[int] = ..., actor: _Optional[str] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cancelled_by: _Optional[str] = ..., error: _Optional[str] = ..., measured_rate: _Optional[float] = ..., subscription: _Optional[str] = ...) -> None: ...

class StartBulkOperationRequest(_message.Message):
    __slots__ = ("filter", "action", "reason", "rate", "dry_run", "subscription")
    FILTER_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_FIELD_NUMBER: _ClassVar[int]
    filter: BulkFilter
    action: BulkAction
    reason: str
    rate: float
    dry_run: bool
    subscription: str
    def __init__(self, filter: _Optional[_Union[BulkFilter, _Mapping]] = ..., action: _Optional[_Union[BulkAction, str]] = ..., reason: _Optional[str] = ..., rate: _Optional[float] = ..., dry_run: _Optional[bool] = ..., subscription: _Optional[str] = ...) -> None: ...

class StartBulkOperationResponse(_message.Message):
    __slots__ = ("operation", "first_matches")
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    FIRST_MATCHES_FIELD_NUMBER: _ClassVar[int]
    operation: BulkOperation
    first_matches: _containers.RepeatedCompositeFieldContainer[EventSummary]
    def __init__(self, operation: _Optional[_Union[BulkOperation, _Mapping]] = ..., first_matches: _Optional[_Iterable[_Union[EventSummary, _Mapping]]] = ...) -> None: ...

class GetBulkOperationRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetBulkOperationResponse(_message.Message):
    __slots__ = ("operation",)
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    operation: BulkOperation
    def __init__(self, operation: _Optional[_Union[BulkOperation, _Mapping]] = ...) -> None: ...

class ListBulkOperationsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListBulkOperationsResponse(_message.Message):
    __slots__ = ("operations", "next_page_token")
    OPERATIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    operations: _containers.RepeatedCompositeFieldContainer[BulkOperation]
    next_page_token: str
    def __init__(self, operations: _Optional[_Iterable[_Union[BulkOperation, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class CancelBulkOperationRequest(_message.Message):
    __slots__ = ("id", "reason")
    ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    id: str
    reason: str
    def __init__(self, id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class CancelBulkOperationResponse(_message.Message):
    __slots__ = ("operation",)
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    operation: BulkOperation
    def __init__(self, operation: _Optional[_Union[BulkOperation, _Mapping]] = ...) -> None: ...

class Subscription(_message.Message):
    __slots__ = ("name", "namespace_pattern", "event_types", "created_at", "created_by")
    NAME_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_PATTERN_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPES_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    name: str
    namespace_pattern: str
    event_types: _containers.RepeatedScalarFieldContainer[str]
    created_at: _timestamp_pb2.Timestamp
    created_by: str
    def __init__(self, name: _Optional[str] = ..., namespace_pattern: _Optional[str] = ..., event_types: _Optional[_Iterable[str]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created_by: _Optional[str] = ...) -> None: ...

class SubscriptionChange(_message.Message):
    __slots__ = ("name", "actor", "reason", "changed_at", "before", "after")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CHANGED_AT_FIELD_NUMBER: _ClassVar[int]
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    name: str
    actor: str
    reason: str
    changed_at: _timestamp_pb2.Timestamp
    before: str
    after: str
    def __init__(self, name: _Optional[str] = ..., actor: _Optional[str] = ..., reason: _Optional[str] = ..., changed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., before: _Optional[str] = ..., after: _Optional[str] = ...) -> None: ...

class CreateSubscriptionRequest(_message.Message):
    __slots__ = ("name", "namespace_pattern", "event_types", "reason")
    NAME_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_PATTERN_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPES_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    name: str
    namespace_pattern: str
    event_types: _containers.RepeatedScalarFieldContainer[str]
    reason: str
    def __init__(self, name: _Optional[str] = ..., namespace_pattern: _Optional[str] = ..., event_types: _Optional[_Iterable[str]] = ..., reason: _Optional[str] = ...) -> None: ...

class CreateSubscriptionResponse(_message.Message):
    __slots__ = ("subscription", "created")
    SUBSCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    subscription: Subscription
    created: bool
    def __init__(self, subscription: _Optional[_Union[Subscription, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class GetSubscriptionRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetSubscriptionResponse(_message.Message):
    __slots__ = ("subscription", "changes")
    SUBSCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    subscription: Subscription
    changes: _containers.RepeatedCompositeFieldContainer[SubscriptionChange]
    def __init__(self, subscription: _Optional[_Union[Subscription, _Mapping]] = ..., changes: _Optional[_Iterable[_Union[SubscriptionChange, _Mapping]]] = ...) -> None: ...

class ListSubscriptionsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListSubscriptionsResponse(_message.Message):
    __slots__ = ("subscriptions",)
    SUBSCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    subscriptions: _containers.RepeatedCompositeFieldContainer[Subscription]
    def __init__(self, subscriptions: _Optional[_Iterable[_Union[Subscription, _Mapping]]] = ...) -> None: ...

class DeleteSubscriptionRequest(_message.Message):
    __slots__ = ("name", "reason")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    name: str
    reason: str
    def __init__(self, name: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class DeleteSubscriptionResponse(_message.Message):
    __slots__ = ("subscription",)
    SUBSCRIPTION_FIELD_NUMBER: _ClassVar[int]
    subscription: Subscription
    def __init__(self, subscription: _Optional[_Union[Subscription, _Mapping]] = ...) -> None: ...

class Destination(_message.Message):
    __slots__ = ("name", "url", "namespace_pattern", "timeout", "max_attempts", "backoff_base", "backoff_cap", "forward_signature_metadata", "state", "paused_reason", "next_try_at", "consecutive_failures", "created_at", "created_by", "concurrency")
    NAME_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_PATTERN_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_BASE_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_CAP_FIELD_NUMBER: _ClassVar[int]
    FORWARD_SIGNATURE_METADATA_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PAUSED_REASON_FIELD_NUMBER: _ClassVar[int]
    NEXT_TRY_AT_FIELD_NUMBER: _ClassVar[int]
    CONSECUTIVE_FAILURES_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    name: str
    url: str
    namespace_pattern: str
    timeout: _duration_pb2.Duration
    max_attempts: int
    backoff_base: _duration_pb2.Duration
    backoff_cap: _duration_pb2.Duration
    forward_signature_metadata: bool
    state: DestinationState
    paused_reason: str
    next_try_at: _timestamp_pb2.Timestamp
    consecutive_failures: int
    created_at: _timestamp_pb2.Timestamp
    created_by: str
    concurrency: int
    def __init__(self, name: _Optional[str] = ..., url: _Optional[str] = ..., namespace_pattern: _Optional[str] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_attempts: _Optional[int] = ..., backoff_base: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., backoff_cap: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., forward_signature_metadata: _Optional[bool] = ..., state: _Optional[_Union[DestinationState, str]] = ..., paused_reason: _Optional[str] = ..., next_try_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., consecutive_failures: _Optional[int] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created_by: _Optional[str] = ..., concurrency: _Optional[int] = ...) -> None: ...

class DeliveryAttempt(_message.Message):
    __slots__ = ("destination", "namespace", "event_key", "webhook_id", "attempt", "fencing_token", "attempted_at", "status_code", "latency", "error", "response_excerpt", "outcome")
    DESTINATION_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    EVENT_KEY_FIELD_NUMBER: _ClassVar[int]
    WEBHOOK_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTED_AT_FIELD_NUMBER: _ClassVar[int]
    STATUS_CODE_FIELD_NUMBER: _ClassVar[int]
    LATENCY_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_EXCERPT_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    destination: str
    namespace: str
    event_key: str
    webhook_id: str
    attempt: int
    fencing_token: int
    attempted_at: _timestamp_pb2.Timestamp
    status_code: int
    latency: _duration_pb2.Duration
    error: str
    response_excerpt: bytes
    outcome: str
    def __init__(self, destination: _Optional[str] = ..., namespace: _Optional[str] = ..., event_key: _Optional[str] = ..., webhook_id: _Optional[str] = ..., attempt: _Optional[int] = ..., fencing_token: _Optional[int] = ..., attempted_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., status_code: _Optional[int] = ..., latency: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., error: _Optional[str] = ..., response_excerpt: _Optional[bytes] = ..., outcome: _Optional[str] = ...) -> None: ...

class CreateDestinationRequest(_message.Message):
    __slots__ = ("name", "url", "namespace_pattern", "secret", "timeout", "max_attempts", "backoff_base", "backoff_cap", "forward_signature_metadata", "concurrency", "reason")
    NAME_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_PATTERN_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_BASE_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_CAP_FIELD_NUMBER: _ClassVar[int]
    FORWARD_SIGNATURE_METADATA_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    name: str
    url: str
    namespace_pattern: str
    secret: str
    timeout: _duration_pb2.Duration
    max_attempts: int
    backoff_base: _duration_pb2.Duration
    backoff_cap: _duration_pb2.Duration
    forward_signature_metadata: bool
    concurrency: int
    reason: str
    def __init__(self, name: _Optional[str] = ..., url: _Optional[str] = ..., namespace_pattern: _Optional[str] = ..., secret: _Optional[str] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_attempts: _Optional[int] = ..., backoff_base: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., backoff_cap: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., forward_signature_metadata: _Optional[bool] = ..., concurrency: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class CreateDestinationResponse(_message.Message):
    __slots__ = ("destination", "secret")
    DESTINATION_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    destination: Destination
    secret: str
    def __init__(self, destination: _Optional[_Union[Destination, _Mapping]] = ..., secret: _Optional[str] = ...) -> None: ...

class GetDestinationRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetDestinationResponse(_message.Message):
    __slots__ = ("destination", "recent_attempts")
    DESTINATION_FIELD_NUMBER: _ClassVar[int]
    RECENT_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    destination: Destination
    recent_attempts: _containers.RepeatedCompositeFieldContainer[DeliveryAttempt]
    def __init__(self, destination: _Optional[_Union[Destination, _Mapping]] = ..., recent_attempts: _Optional[_Iterable[_Union[DeliveryAttempt, _Mapping]]] = ...) -> None: ...

class ListDestinationsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListDestinationsResponse(_message.Message):
    __slots__ = ("destinations",)
    DESTINATIONS_FIELD_NUMBER: _ClassVar[int]
    destinations: _containers.RepeatedCompositeFieldContainer[Destination]
    def __init__(self, destinations: _Optional[_Iterable[_Union[Destination, _Mapping]]] = ...) -> None: ...

class DeleteDestinationRequest(_message.Message):
    __slots__ = ("name", "reason")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    name: str
    reason: str
    def __init__(self, name: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class DeleteDestinationResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ResumeDestinationRequest(_message.Message):
    __slots__ = ("name", "reason")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    name: str
    reason: str
    def __init__(self, name: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ResumeDestinationResponse(_message.Message):
    __slots__ = ("destination",)
    DESTINATION_FIELD_NUMBER: _ClassVar[int]
    destination: Destination
    def __init__(self, destination: _Optional[_Union[Destination, _Mapping]] = ...) -> None: ...
