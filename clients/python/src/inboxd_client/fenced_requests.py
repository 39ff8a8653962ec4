"""The six fenced calls, each built once and sent where its class sends calls: unary, or on a Work stream.

`AsyncInboxClient` sends them as unary RPCs; a worker's `WorkStream` sends
them on its open stream, each with a sequence. Both answer each call as the
unary call would (its response, or its error raised), so the requests are
built and the answers read here, once; a subclass says only how a call
travels (`_call`).
"""

# `timeout` is each call's deadline, as the unary calls name it, not an asyncio timeout.
# ruff: noqa: ASYNC109

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import TypeVar

from google.protobuf.message import Message

from inboxd_client import builders, rpcs
from inboxd_client.builders import DurationLike, Fenced
from inboxd_client.errors import InboxError, complete_batch_outcomes
from inboxd_client.v1 import inbox_pb2, types_pb2

R = TypeVar("R", bound=Message)


class FencedRequests(ABC):
    """RenewLease, Complete, CompleteBatch, Fail, Release and RecordActionOutcome, fenced by the event's claim."""

    @abstractmethod
    async def _call(self, rpc: rpcs.Rpc[R], request: Message, timeout: float | None) -> R:
        """Sends `request` as `rpc`; its answer, or the call's own error raised."""

    async def renew_lease(
        self, event: Fenced, *, lease: DurationLike | None = None, timeout: float | None = None
    ) -> inbox_pb2.RenewLeaseResponse:
        """Moves the lease's end to now + `lease` (the server's default when None)."""
        return await self._call(rpcs.RENEW_LEASE, builders.renew_lease_request(event, lease), timeout)

    async def complete(
        self,
        event: Fenced,
        *,
        disposition: types_pb2.Disposition = types_pb2.DISPOSITION_APPLIED,
        reason: str = "",
        timeout: float | None = None,
    ) -> inbox_pb2.CompleteResponse:
        """Finishes the event; DISPOSITION_IGNORED needs a `reason`."""
        return await self._call(rpcs.COMPLETE, builders.complete_request(event, disposition, reason), timeout)

    async def complete_many(
        self, items: Iterable[Fenced | inbox_pb2.CompleteRequest], *, timeout: float | None = None
    ) -> list[InboxError | None]:
        """Finishes up to 500 events in one call (CompleteBatch), each judged alone.

        Pass claimed events (completed as APPLIED) or `CompleteRequest`s (see
        `builders.complete_request`, for IGNORED with a reason). Answers one
        entry per item, in order: None when it completed (or this same claim
        had completed it), else the error `complete` would have raised for it
        (`ClaimSuperseded`, `NotFound`, `PermissionDenied`, ...), returned, not
        raised. Raises only for the call as a whole (UNAUTHENTICATED, UNAVAILABLE ...).
        """
        request = builders.complete_batch_request(items)
        response = await self._call(rpcs.COMPLETE_BATCH, request, timeout)
        return complete_batch_outcomes(response, len(request.completions))

    async def fail(
        self,
        event: Fenced,
        error: str,
        *,
        permanent: bool = False,
        retry_after: DurationLike | None = None,
        timeout: float | None = None,
    ) -> inbox_pb2.FailResponse:
        """Schedules a retry (backoff, or `retry_after`) or dead-letters; never put the payload in `error`."""
        request = builders.fail_request(event, error, permanent=permanent, retry_after=retry_after)
        return await self._call(rpcs.FAIL, request, timeout)

    async def release(self, event: Fenced, *, timeout: float | None = None) -> inbox_pb2.ReleaseResponse:
        """Gives the event back at once, without counting the attempt."""
        return await self._call(rpcs.RELEASE, builders.release_request(event), timeout)

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
        """Writes one step of an external action to the event's ledger; INTENDED mints the idempotency key."""
        request = builders.record_action_outcome_request(event, action, state, external_ref, detail)
        return await self._call(rpcs.RECORD_ACTION_OUTCOME, request, timeout)
