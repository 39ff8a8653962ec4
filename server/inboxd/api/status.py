"""The one table from domain errors to gRPC status codes."""

from __future__ import annotations

import grpc

from inboxd.domain import errors
from inboxd_client.v1 import inbox_pb2

STATUS_BY_ERROR: dict[type[errors.InboxError], grpc.StatusCode] = {
    errors.InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    errors.NotFound: grpc.StatusCode.NOT_FOUND,
    errors.AlreadyExists: grpc.StatusCode.ALREADY_EXISTS,
    errors.ClaimSuperseded: grpc.StatusCode.ABORTED,
    errors.TransitionNotAllowed: grpc.StatusCode.FAILED_PRECONDITION,
    errors.Unavailable: grpc.StatusCode.UNAVAILABLE,
    errors.Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
    errors.PermissionDenied: grpc.StatusCode.PERMISSION_DENIED,
    errors.TooManyRequests: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.DatabaseFault: grpc.StatusCode.INTERNAL,
}


def status_for(exc: errors.InboxError) -> grpc.StatusCode:
    for cls in type(exc).__mro__:
        code = STATUS_BY_ERROR.get(cls)
        if code is not None:
            return code
    return grpc.StatusCode.INTERNAL


def item_status(exc: errors.InboxError) -> inbox_pb2.ItemStatus:
    """One stream item's refusal: the status code its unary call would have ended with, and why."""
    return inbox_pb2.ItemStatus(code=status_for(exc).value[0], message=str(exc))


# An item's surprise, logged by the stream that met it: the item is answered, its neighbours go on.
INTERNAL_ITEM = inbox_pb2.ItemStatus(code=grpc.StatusCode.INTERNAL.value[0], message="internal error")


def within(prefix: str, exc: errors.InboxError) -> errors.InboxError:
    """An item's error with its field named within the item (`accept.payload`, `complete.claim_token`)."""
    if not isinstance(exc, errors.InvalidArgument):
        return exc
    if exc.field != prefix and not exc.field.startswith(f"{prefix}."):
        return errors.InvalidArgument(f"{prefix}.{exc.field}", exc.problem)
    return exc
