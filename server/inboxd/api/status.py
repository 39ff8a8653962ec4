"""The one table from domain errors to gRPC status codes."""

from __future__ import annotations

import grpc

from inboxd.domain import errors

STATUS_BY_ERROR: dict[type[errors.InboxError], grpc.StatusCode] = {
    errors.InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    errors.NotFound: grpc.StatusCode.NOT_FOUND,
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
