import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EventState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EVENT_STATE_UNSPECIFIED: _ClassVar[EventState]
    EVENT_STATE_PENDING: _ClassVar[EventState]
    EVENT_STATE_PROCESSING: _ClassVar[EventState]
    EVENT_STATE_COMPLETED: _ClassVar[EventState]
    EVENT_STATE_DEAD_LETTERED: _ClassVar[EventState]

class ActionState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACTION_STATE_UNSPECIFIED: _ClassVar[ActionState]
    ACTION_STATE_INTENDED: _ClassVar[ActionState]
    ACTION_STATE_SUCCEEDED: _ClassVar[ActionState]
    ACTION_STATE_FAILED: _ClassVar[ActionState]
    ACTION_STATE_UNKNOWN: _ClassVar[ActionState]

class Disposition(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DISPOSITION_UNSPECIFIED: _ClassVar[Disposition]
    DISPOSITION_APPLIED: _ClassVar[Disposition]
    DISPOSITION_IGNORED: _ClassVar[Disposition]
EVENT_STATE_UNSPECIFIED: EventState
EVENT_STATE_PENDING: EventState
EVENT_STATE_PROCESSING: EventState
EVENT_STATE_COMPLETED: EventState
EVENT_STATE_DEAD_LETTERED: EventState
ACTION_STATE_UNSPECIFIED: ActionState
ACTION_STATE_INTENDED: ActionState
ACTION_STATE_SUCCEEDED: ActionState
ACTION_STATE_FAILED: ActionState
ACTION_STATE_UNKNOWN: ActionState
DISPOSITION_UNSPECIFIED: Disposition
DISPOSITION_APPLIED: Disposition
DISPOSITION_IGNORED: Disposition

class ActionRecord(_message.Message):
    __slots__ = ("action", "state", "idempotency_key", "external_ref", "detail", "fencing_token", "updated_at")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    EXTERNAL_REF_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    action: str
    state: ActionState
    idempotency_key: str
    external_ref: str
    detail: str
    fencing_token: int
    updated_at: _timestamp_pb2.Timestamp
    def __init__(self, action: _Optional[str] = ..., state: _Optional[_Union[ActionState, str]] = ..., idempotency_key: _Optional[str] = ..., external_ref: _Optional[str] = ..., detail: _Optional[str] = ..., fencing_token: _Optional[int] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class TraceContext(_message.Message):
    __slots__ = ("traceparent", "tracestate")
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    TRACESTATE_FIELD_NUMBER: _ClassVar[int]
    traceparent: str
    tracestate: str
    def __init__(self, traceparent: _Optional[str] = ..., tracestate: _Optional[str] = ...) -> None: ...
