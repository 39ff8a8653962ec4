"""Python exceptions for inboxd's gRPC status codes, one class per code.

Catch `InboxError` for all of them, or the one class you can act on:
`ClaimSuperseded` (ABORTED) means your claim is no longer the event's current
one, so stop working on it; `Unavailable` means nothing was acknowledged.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc

from inboxd_client.v1 import inbox_pb2


class InboxError(Exception):
    """Base of every error the client raises for a non-OK status; `code` and `details` are the server's."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, details: str = "", *, method: str = "") -> None:
        self.details = details
        self.method = method
        where = f"{method}: " if method else ""
        super().__init__(f"{where}{self.code.name}: {details}" if details else f"{where}{self.code.name}")


class Cancelled(InboxError):
    """The call was cancelled, usually by the caller."""

    code = grpc.StatusCode.CANCELLED


class Unknown(InboxError):
    """The server answered UNKNOWN: an error that is no other code."""

    code = grpc.StatusCode.UNKNOWN


class InvalidArgument(InboxError):
    """The request is malformed or out of range; nothing was stored. Retrying the same request cannot help."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class DeadlineExceeded(InboxError, TimeoutError):
    """The call's deadline passed: the server may or may not have acted."""

    code = grpc.StatusCode.DEADLINE_EXCEEDED


class NotFound(InboxError):
    """No event has that (namespace, event_key)."""

    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(InboxError):
    """ALREADY_EXISTS: a subscription's name taken by another definition (an Accept answers DUPLICATE instead)."""

    code = grpc.StatusCode.ALREADY_EXISTS


class PermissionDenied(InboxError):
    """The token lacks the scope, or the namespace is not granted to it."""

    code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhausted(InboxError):
    """A limit was reached: a server-side cap, or a message over gRPC's size limit. Worth retrying later."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPrecondition(InboxError):
    """The event's state does not allow the transition (a replay of a PENDING event, an action after SUCCEEDED)."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class ClaimSuperseded(InboxError):
    """ABORTED: the claim token is not the event's current one; its lease was taken over or its claim ended.

    Stop working on the event: whatever the stale claim does next is refused.
    """

    code = grpc.StatusCode.ABORTED


class OutOfRange(InboxError):
    """OUT_OF_RANGE: not answered by inboxd today; kept so every code has its class."""

    code = grpc.StatusCode.OUT_OF_RANGE


class Unimplemented(InboxError):
    """The server does not offer this RPC (an older server, or a feature not built yet)."""

    code = grpc.StatusCode.UNIMPLEMENTED


class Internal(InboxError):
    """The server failed in a way it did not expect: a bug to report, not an answer about your request."""

    code = grpc.StatusCode.INTERNAL


class Unavailable(InboxError, ConnectionError):
    """The server or its database cannot be reached. For inboxd's own answers, nothing was acknowledged."""

    code = grpc.StatusCode.UNAVAILABLE


class DataLoss(InboxError):
    """DATA_LOSS: not answered by inboxd today; kept so every code has its class."""

    code = grpc.StatusCode.DATA_LOSS


class Unauthenticated(InboxError):
    """No token, or a token the server does not know."""

    code = grpc.StatusCode.UNAUTHENTICATED


ERROR_BY_CODE: dict[grpc.StatusCode, type[InboxError]] = {
    cls.code: cls
    for cls in (
        Cancelled,
        Unknown,
        InvalidArgument,
        DeadlineExceeded,
        NotFound,
        AlreadyExists,
        PermissionDenied,
        ResourceExhausted,
        FailedPrecondition,
        ClaimSuperseded,
        OutOfRange,
        Unimplemented,
        Internal,
        Unavailable,
        DataLoss,
        Unauthenticated,
    )
}


_STATUS_BY_NUMBER: dict[int, grpc.StatusCode] = {code.value[0]: code for code in grpc.StatusCode}


def error_from_code(code: int, details: str, *, method: str = "") -> InboxError | None:
    """The exception for a status code given as its number (a CompleteBatch item's `code`); None for OK."""
    status = _STATUS_BY_NUMBER.get(code, grpc.StatusCode.UNKNOWN)
    if status is grpc.StatusCode.OK:
        return None
    return error_from_status(status, details or f"status code {code}", method=method)


def complete_batch_outcomes(response: inbox_pb2.CompleteBatchResponse, sent: int) -> list[InboxError | None]:
    """Each CompleteBatch item's outcome, in order: None when it completed, else the error Complete would raise."""
    return _completion_outcomes(response.results, sent, "CompleteBatch")


def _completion_outcomes(
    results: Sequence[inbox_pb2.CompleteResult], sent: int, method: str
) -> list[InboxError | None]:
    if len(results) != sent:
        raise Internal(f"{method} answered {len(results)} results for {sent} completions")
    return [error_from_code(r.code, r.message, method=method) for r in results]


def claim_completion_outcomes(response: inbox_pb2.ClaimResponse, sent: int) -> list[InboxError | None]:
    """The outcome of each completion a Claim carried, as `complete_batch_outcomes` reads a CompleteBatch's."""
    return _completion_outcomes(response.completion_results, sent, "Claim")


def error_from_status(code: grpc.StatusCode, details: str | None, *, method: str = "") -> InboxError:
    """The exception for a non-OK status; a code this table lacks becomes `Unknown`."""
    cls = ERROR_BY_CODE.get(code, Unknown)
    return cls(details or "", method=method)
