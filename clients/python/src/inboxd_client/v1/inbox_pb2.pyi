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

class AcceptOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACCEPT_OUTCOME_UNSPECIFIED: _ClassVar[AcceptOutcome]
    ACCEPT_OUTCOME_ACCEPTED: _ClassVar[AcceptOutcome]
    ACCEPT_OUTCOME_DUPLICATE: _ClassVar[AcceptOutcome]
    ACCEPT_OUTCOME_CONFLICT: _ClassVar[AcceptOutcome]
ACCEPT_OUTCOME_UNSPECIFIED: AcceptOutcome
ACCEPT_OUTCOME_ACCEPTED: AcceptOutcome
ACCEPT_OUTCOME_DUPLICATE: AcceptOutcome
ACCEPT_OUTCOME_CONFLICT: AcceptOutcome

class AcceptRequest(_message.Message):
    __slots__ = ("namespace", "event_key", "event_type", "payload", "metadata", "message_id", "ordering_key", "revision", "available_at", "content_type", "trace_context")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    EVENT_KEY_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    ORDERING_KEY_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_AT_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    TRACE_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    event_key: str
    event_type: str
    payload: bytes
    metadata: _containers.ScalarMap[str, str]
    message_id: str
    ordering_key: str
    revision: int
    available_at: _timestamp_pb2.Timestamp
    content_type: str
    trace_context: _types_pb2.TraceContext
    def __init__(self, namespace: _Optional[str] = ..., event_key: _Optional[str] = ..., event_type: _Optional[str] = ..., payload: _Optional[bytes] = ..., metadata: _Optional[_Mapping[str, str]] = ..., message_id: _Optional[str] = ..., ordering_key: _Optional[str] = ..., revision: _Optional[int] = ..., available_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., content_type: _Optional[str] = ..., trace_context: _Optional[_Union[_types_pb2.TraceContext, _Mapping]] = ...) -> None: ...

class AcceptResponse(_message.Message):
    __slots__ = ("outcome", "state", "accepted_at")
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_AT_FIELD_NUMBER: _ClassVar[int]
    outcome: AcceptOutcome
    state: _types_pb2.EventState
    accepted_at: _timestamp_pb2.Timestamp
    def __init__(self, outcome: _Optional[_Union[AcceptOutcome, str]] = ..., state: _Optional[_Union[_types_pb2.EventState, str]] = ..., accepted_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class AcceptBatchRequest(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[AcceptRequest]
    def __init__(self, events: _Optional[_Iterable[_Union[AcceptRequest, _Mapping]]] = ...) -> None: ...

class AcceptBatchResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[AcceptResponse]
    def __init__(self, results: _Optional[_Iterable[_Union[AcceptResponse, _Mapping]]] = ...) -> None: ...

class ClaimRequest(_message.Message):
    __slots__ = ("namespaces", "event_types", "max_events", "lease", "wait", "worker_id", "completions")
    NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPES_FIELD_NUMBER: _ClassVar[int]
    MAX_EVENTS_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    COMPLETIONS_FIELD_NUMBER: _ClassVar[int]
    namespaces: _containers.RepeatedScalarFieldContainer[str]
    event_types: _containers.RepeatedScalarFieldContainer[str]
    max_events: int
    lease: _duration_pb2.Duration
    wait: _duration_pb2.Duration
    worker_id: str
    completions: _containers.RepeatedCompositeFieldContainer[CompleteRequest]
    def __init__(self, namespaces: _Optional[_Iterable[str]] = ..., event_types: _Optional[_Iterable[str]] = ..., max_events: _Optional[int] = ..., lease: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., wait: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., worker_id: _Optional[str] = ..., completions: _Optional[_Iterable[_Union[CompleteRequest, _Mapping]]] = ...) -> None: ...

class ClaimedEvent(_message.Message):
    __slots__ = ("namespace", "event_key", "event_type", "payload", "metadata", "message_id", "ordering_key", "revision", "attempt", "claim_token", "fencing_token", "lease_expires_at", "accepted_at", "last_error", "actions", "applied_revision", "stale", "content_type", "trace_context", "replayed")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    EVENT_KEY_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    ORDERING_KEY_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    CLAIM_TOKEN_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    APPLIED_REVISION_FIELD_NUMBER: _ClassVar[int]
    STALE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    TRACE_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    event_key: str
    event_type: str
    payload: bytes
    metadata: _containers.ScalarMap[str, str]
    message_id: str
    ordering_key: str
    revision: int
    attempt: int
    claim_token: str
    fencing_token: int
    lease_expires_at: _timestamp_pb2.Timestamp
    accepted_at: _timestamp_pb2.Timestamp
    last_error: str
    actions: _containers.RepeatedCompositeFieldContainer[_types_pb2.ActionRecord]
    applied_revision: int
    stale: bool
    content_type: str
    trace_context: _types_pb2.TraceContext
    replayed: bool
    def __init__(self, namespace: _Optional[str] = ..., event_key: _Optional[str] = ..., event_type: _Optional[str] = ..., payload: _Optional[bytes] = ..., metadata: _Optional[_Mapping[str, str]] = ..., message_id: _Optional[str] = ..., ordering_key: _Optional[str] = ..., revision: _Optional[int] = ..., attempt: _Optional[int] = ..., claim_token: _Optional[str] = ..., fencing_token: _Optional[int] = ..., lease_expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., accepted_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_error: _Optional[str] = ..., actions: _Optional[_Iterable[_Union[_types_pb2.ActionRecord, _Mapping]]] = ..., applied_revision: _Optional[int] = ..., stale: _Optional[bool] = ..., content_type: _Optional[str] = ..., trace_context: _Optional[_Union[_types_pb2.TraceContext, _Mapping]] = ..., replayed: _Optional[bool] = ...) -> None: ...

class ClaimResponse(_message.Message):
    __slots__ = ("events", "completion_results")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_RESULTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[ClaimedEvent]
    completion_results: _containers.RepeatedCompositeFieldContainer[CompleteResult]
    def __init__(self, events: _Optional[_Iterable[_Union[ClaimedEvent, _Mapping]]] = ..., completion_results: _Optional[_Iterable[_Union[CompleteResult, _Mapping]]] = ...) -> None: ...

class RenewLeaseRequest(_message.Message):
    __slots__ = ("namespace", "event_key", "claim_token", "lease")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    EVENT_KEY_FIELD_NUMBER: _ClassVar[int]
    CLAIM_TOKEN_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    event_key: str
    claim_token: str
    lease: _duration_pb2.Duration
    def __init__(self, namespace: _Optional[str] = ..., event_key: _Optional[str] = ..., claim_token: _Optional[str] = ..., lease: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class RenewLeaseResponse(_message.Message):
    __slots__ = ("lease_expires_at",)
    LEASE_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    lease_expires_at: _timestamp_pb2.Timestamp
    def __init__(self, lease_expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CompleteRequest(_message.Message):
    __slots__ = ("namespace", "event_key", "claim_token", "disposition", "reason")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    EVENT_KEY_FIELD_NUMBER: _ClassVar[int]
    CLAIM_TOKEN_FIELD_NUMBER: _ClassVar[int]
    DISPOSITION_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    event_key: str
    claim_token: str
    disposition: _types_pb2.Disposition
    reason: str
    def __init__(self, namespace: _Optional[str] = ..., event_key: _Optional[str] = ..., claim_token: _Optional[str] = ..., disposition: _Optional[_Union[_types_pb2.Disposition, str]] = ..., reason: _Optional[str] = ...) -> None: ...

class CompleteResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CompleteBatchRequest(_message.Message):
    __slots__ = ("completions",)
    COMPLETIONS_FIELD_NUMBER: _ClassVar[int]
    completions: _containers.RepeatedCompositeFieldContainer[CompleteRequest]
    def __init__(self, completions: _Optional[_Iterable[_Union[CompleteRequest, _Mapping]]] = ...) -> None: ...

class CompleteResult(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class CompleteBatchResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[CompleteResult]
    def __init__(self, results: _Optional[_Iterable[_Union[CompleteResult, _Mapping]]] = ...) -> None: ...

class FailRequest(_message.Message):
    __slots__ = ("namespace", "event_key", "claim_token", "error", "permanent", "retry_after")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    EVENT_KEY_FIELD_NUMBER: _ClassVar[int]
    CLAIM_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PERMANENT_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    event_key: str
    claim_token: str
    error: str
    permanent: bool
    retry_after: _duration_pb2.Duration
    def __init__(self, namespace: _Optional[str] = ..., event_key: _Optional[str] = ..., claim_token: _Optional[str] = ..., error: _Optional[str] = ..., permanent: _Optional[bool] = ..., retry_after: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class FailResponse(_message.Message):
    __slots__ = ("state", "next_attempt_at")
    STATE_FIELD_NUMBER: _ClassVar[int]
    NEXT_ATTEMPT_AT_FIELD_NUMBER: _ClassVar[int]
    state: _types_pb2.EventState
    next_attempt_at: _timestamp_pb2.Timestamp
    def __init__(self, state: _Optional[_Union[_types_pb2.EventState, str]] = ..., next_attempt_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ReleaseRequest(_message.Message):
    __slots__ = ("namespace", "event_key", "claim_token")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    EVENT_KEY_FIELD_NUMBER: _ClassVar[int]
    CLAIM_TOKEN_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    event_key: str
    claim_token: str
    def __init__(self, namespace: _Optional[str] = ..., event_key: _Optional[str] = ..., claim_token: _Optional[str] = ...) -> None: ...

class ReleaseResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RecordActionOutcomeRequest(_message.Message):
    __slots__ = ("namespace", "event_key", "claim_token", "action", "state", "external_ref", "detail")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    EVENT_KEY_FIELD_NUMBER: _ClassVar[int]
    CLAIM_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EXTERNAL_REF_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    event_key: str
    claim_token: str
    action: str
    state: _types_pb2.ActionState
    external_ref: str
    detail: str
    def __init__(self, namespace: _Optional[str] = ..., event_key: _Optional[str] = ..., claim_token: _Optional[str] = ..., action: _Optional[str] = ..., state: _Optional[_Union[_types_pb2.ActionState, str]] = ..., external_ref: _Optional[str] = ..., detail: _Optional[str] = ...) -> None: ...

class RecordActionOutcomeResponse(_message.Message):
    __slots__ = ("action",)
    ACTION_FIELD_NUMBER: _ClassVar[int]
    action: _types_pb2.ActionRecord
    def __init__(self, action: _Optional[_Union[_types_pb2.ActionRecord, _Mapping]] = ...) -> None: ...

class AcceptStreamRequest(_message.Message):
    __slots__ = ("sequence", "accept")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    ACCEPT_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    accept: AcceptRequest
    def __init__(self, sequence: _Optional[int] = ..., accept: _Optional[_Union[AcceptRequest, _Mapping]] = ...) -> None: ...

class AcceptStreamResponse(_message.Message):
    __slots__ = ("sequence", "accepted", "error")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    accepted: AcceptResponse
    error: ItemStatus
    def __init__(self, sequence: _Optional[int] = ..., accepted: _Optional[_Union[AcceptResponse, _Mapping]] = ..., error: _Optional[_Union[ItemStatus, _Mapping]] = ...) -> None: ...

class ItemStatus(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class WorkRequest(_message.Message):
    __slots__ = ("sequence", "credit", "stop_pushing", "trace_context", "subscribe", "complete", "complete_batch", "fail", "release", "renew_lease", "record_action_outcome")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    CREDIT_FIELD_NUMBER: _ClassVar[int]
    STOP_PUSHING_FIELD_NUMBER: _ClassVar[int]
    TRACE_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBE_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_BATCH_FIELD_NUMBER: _ClassVar[int]
    FAIL_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    RENEW_LEASE_FIELD_NUMBER: _ClassVar[int]
    RECORD_ACTION_OUTCOME_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    credit: int
    stop_pushing: bool
    trace_context: _types_pb2.TraceContext
    subscribe: WorkSubscription
    complete: CompleteRequest
    complete_batch: CompleteBatchRequest
    fail: FailRequest
    release: ReleaseRequest
    renew_lease: RenewLeaseRequest
    record_action_outcome: RecordActionOutcomeRequest
    def __init__(self, sequence: _Optional[int] = ..., credit: _Optional[int] = ..., stop_pushing: _Optional[bool] = ..., trace_context: _Optional[_Union[_types_pb2.TraceContext, _Mapping]] = ..., subscribe: _Optional[_Union[WorkSubscription, _Mapping]] = ..., complete: _Optional[_Union[CompleteRequest, _Mapping]] = ..., complete_batch: _Optional[_Union[CompleteBatchRequest, _Mapping]] = ..., fail: _Optional[_Union[FailRequest, _Mapping]] = ..., release: _Optional[_Union[ReleaseRequest, _Mapping]] = ..., renew_lease: _Optional[_Union[RenewLeaseRequest, _Mapping]] = ..., record_action_outcome: _Optional[_Union[RecordActionOutcomeRequest, _Mapping]] = ...) -> None: ...

class WorkSubscription(_message.Message):
    __slots__ = ("namespaces", "event_types", "lease", "worker_id")
    NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPES_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    namespaces: _containers.RepeatedScalarFieldContainer[str]
    event_types: _containers.RepeatedScalarFieldContainer[str]
    lease: _duration_pb2.Duration
    worker_id: str
    def __init__(self, namespaces: _Optional[_Iterable[str]] = ..., event_types: _Optional[_Iterable[str]] = ..., lease: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., worker_id: _Optional[str] = ...) -> None: ...

class WorkResponse(_message.Message):
    __slots__ = ("subscribed", "events", "result", "draining")
    SUBSCRIBED_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    DRAINING_FIELD_NUMBER: _ClassVar[int]
    subscribed: WorkSubscribed
    events: WorkEvents
    result: WorkResult
    draining: WorkDraining
    def __init__(self, subscribed: _Optional[_Union[WorkSubscribed, _Mapping]] = ..., events: _Optional[_Union[WorkEvents, _Mapping]] = ..., result: _Optional[_Union[WorkResult, _Mapping]] = ..., draining: _Optional[_Union[WorkDraining, _Mapping]] = ...) -> None: ...

class WorkDraining(_message.Message):
    __slots__ = ("grace",)
    GRACE_FIELD_NUMBER: _ClassVar[int]
    grace: _duration_pb2.Duration
    def __init__(self, grace: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class WorkSubscribed(_message.Message):
    __slots__ = ("lease", "heartbeat")
    LEASE_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    lease: _duration_pb2.Duration
    heartbeat: _duration_pb2.Duration
    def __init__(self, lease: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., heartbeat: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class WorkEvents(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[ClaimedEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[ClaimedEvent, _Mapping]]] = ...) -> None: ...

class WorkResult(_message.Message):
    __slots__ = ("sequence", "complete", "complete_batch", "fail", "release", "renew_lease", "record_action_outcome", "error")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_BATCH_FIELD_NUMBER: _ClassVar[int]
    FAIL_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    RENEW_LEASE_FIELD_NUMBER: _ClassVar[int]
    RECORD_ACTION_OUTCOME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    complete: CompleteResponse
    complete_batch: CompleteBatchResponse
    fail: FailResponse
    release: ReleaseResponse
    renew_lease: RenewLeaseResponse
    record_action_outcome: RecordActionOutcomeResponse
    error: ItemStatus
    def __init__(self, sequence: _Optional[int] = ..., complete: _Optional[_Union[CompleteResponse, _Mapping]] = ..., complete_batch: _Optional[_Union[CompleteBatchResponse, _Mapping]] = ..., fail: _Optional[_Union[FailResponse, _Mapping]] = ..., release: _Optional[_Union[ReleaseResponse, _Mapping]] = ..., renew_lease: _Optional[_Union[RenewLeaseResponse, _Mapping]] = ..., record_action_outcome: _Optional[_Union[RecordActionOutcomeResponse, _Mapping]] = ..., error: _Optional[_Union[ItemStatus, _Mapping]] = ...) -> None: ...
