"""The fenced calls a worker's claims make (actions, renewals, Complete, Fail, Release), and where they go.

A claim's machinery (its action ledger, its finish, its batched completions)
asks one `FencedCalls` for them. The client's unary calls are one; the
worker's open Work stream is the other (`work_stream.WorkStream`), where a
message costs the server a quarter of a unary call. `CallRoute` is what the
worker hands its claims: it sends each call where the worker gets its
events now, decided at run time (the stream, or unary calls on a server
without it).
"""

# `timeout` is each call's deadline, as the unary calls name it, not an asyncio timeout.
# ruff: noqa: ASYNC109

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from inboxd_client.builders import DurationLike, Fenced
from inboxd_client.errors import InboxError
from inboxd_client.v1 import inbox_pb2, types_pb2

APPLIED = types_pb2.DISPOSITION_APPLIED


class FencedCalls(Protocol):
    """The fenced calls of a claim, each answered (or raised) as the unary call would answer it."""

    async def complete(
        self,
        event: Fenced,
        *,
        disposition: types_pb2.Disposition = APPLIED,
        reason: str = "",
        timeout: float | None = None,
    ) -> inbox_pb2.CompleteResponse: ...

    async def complete_many(
        self, items: Iterable[Fenced | inbox_pb2.CompleteRequest], *, timeout: float | None = None
    ) -> list[InboxError | None]: ...

    async def fail(
        self,
        event: Fenced,
        error: str,
        *,
        permanent: bool = False,
        retry_after: DurationLike | None = None,
        timeout: float | None = None,
    ) -> inbox_pb2.FailResponse: ...

    async def release(self, event: Fenced, *, timeout: float | None = None) -> inbox_pb2.ReleaseResponse: ...

    async def renew_lease(
        self, event: Fenced, *, lease: DurationLike | None = None, timeout: float | None = None
    ) -> inbox_pb2.RenewLeaseResponse: ...

    async def record_action_outcome(
        self,
        event: Fenced,
        action: str,
        state: types_pb2.ActionState,
        *,
        external_ref: str = "",
        detail: str = "",
        timeout: float | None = None,
    ) -> inbox_pb2.RecordActionOutcomeResponse: ...


class CallRoute:
    """Sends each fenced call over `stream` while the worker has one, else as the client's unary call.

    A call whose claim came from a stream that broke goes over the next one
    (or unary): it is refused ABORTED all the same, since that stream's end
    ended the claim, and an action's outcome is recorded from any claim.
    It forwards the public calls, not `FencedRequests._call`: a client
    subclass's own `complete` (instrumentation, a test's recorder) still runs.
    """

    def __init__(self, client: FencedCalls) -> None:
        self.client = client
        self.stream: FencedCalls | None = None

    @property
    def _to(self) -> FencedCalls:
        return self.client if self.stream is None else self.stream

    async def complete(
        self,
        event: Fenced,
        *,
        disposition: types_pb2.Disposition = APPLIED,
        reason: str = "",
        timeout: float | None = None,
    ) -> inbox_pb2.CompleteResponse:
        return await self._to.complete(event, disposition=disposition, reason=reason, timeout=timeout)

    async def complete_many(
        self, items: Iterable[Fenced | inbox_pb2.CompleteRequest], *, timeout: float | None = None
    ) -> list[InboxError | None]:
        return await self._to.complete_many(items, timeout=timeout)

    async def fail(
        self,
        event: Fenced,
        error: str,
        *,
        permanent: bool = False,
        retry_after: DurationLike | None = None,
        timeout: float | None = None,
    ) -> inbox_pb2.FailResponse:
        return await self._to.fail(event, error, permanent=permanent, retry_after=retry_after, timeout=timeout)

    async def release(self, event: Fenced, *, timeout: float | None = None) -> inbox_pb2.ReleaseResponse:
        return await self._to.release(event, timeout=timeout)

    async def renew_lease(
        self, event: Fenced, *, lease: DurationLike | None = None, timeout: float | None = None
    ) -> inbox_pb2.RenewLeaseResponse:
        return await self._to.renew_lease(event, lease=lease, timeout=timeout)

    async def record_action_outcome(
        self,
        event: Fenced,
        action: str,
        state: types_pb2.ActionState,
        *,
        external_ref: str = "",
        detail: str = "",
        timeout: float | None = None,
    ) -> inbox_pb2.RecordActionOutcomeResponse:
        return await self._to.record_action_outcome(
            event, action, state, external_ref=external_ref, detail=detail, timeout=timeout
        )
