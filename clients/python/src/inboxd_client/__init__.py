"""Client and worker runtime for inboxd, the durable webhook inbox.

`AsyncInboxClient` / `InboxClient` call every RPC; `Worker` runs handlers with
renewed leases, fenced completions, recorded actions and a graceful stop. The
generated stubs live in `inboxd_client.v1`.
"""

from __future__ import annotations

from inboxd_client._version import __version__ as __version__
from inboxd_client.accept_stream import AcceptStream
from inboxd_client.actions import UNCERTAIN_ERRORS, Action
from inboxd_client.aio_client import AsyncInboxClient
from inboxd_client.builders import accept_request
from inboxd_client.connection import RetryPolicy, TlsConfig
from inboxd_client.context import EventContext, SyncEventContext
from inboxd_client.errors import (
    AlreadyExists,
    Cancelled,
    ClaimSuperseded,
    DataLoss,
    DeadlineExceeded,
    FailedPrecondition,
    InboxError,
    Internal,
    InvalidArgument,
    NotFound,
    OutOfRange,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
    Unimplemented,
    Unknown,
)
from inboxd_client.finishing import WorkerStats
from inboxd_client.outcomes import (
    ActionResult,
    ActionUnresolved,
    HandlerTimeout,
    Ignore,
    PermanentError,
    Reconciled,
    RetryLater,
    UncertainOutcome,
)
from inboxd_client.payloads import NotJsonPayload
from inboxd_client.sync_client import InboxClient
from inboxd_client.v1.inbox_pb2 import AcceptOutcome
from inboxd_client.v1.types_pb2 import ActionState, Disposition, EventState
from inboxd_client.worker import Worker

__all__ = [
    "UNCERTAIN_ERRORS",
    "AcceptOutcome",
    "AcceptStream",
    "Action",
    "ActionResult",
    "ActionState",
    "ActionUnresolved",
    "AlreadyExists",
    "AsyncInboxClient",
    "Cancelled",
    "ClaimSuperseded",
    "DataLoss",
    "DeadlineExceeded",
    "Disposition",
    "EventContext",
    "EventState",
    "FailedPrecondition",
    "HandlerTimeout",
    "Ignore",
    "InboxClient",
    "InboxError",
    "Internal",
    "InvalidArgument",
    "NotFound",
    "NotJsonPayload",
    "OutOfRange",
    "PermanentError",
    "PermissionDenied",
    "Reconciled",
    "ResourceExhausted",
    "RetryLater",
    "RetryPolicy",
    "SyncEventContext",
    "TlsConfig",
    "Unauthenticated",
    "Unavailable",
    "UncertainOutcome",
    "Unimplemented",
    "Unknown",
    "Worker",
    "WorkerStats",
    "accept_request",
]
