"""InboxService: the data plane for edges and workers."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

import grpc

from inboxd.api import convert
from inboxd.api.accept_stream import AcceptStreaming
from inboxd.api.identity import current_caller
from inboxd.api.work_stream import WorkStreaming
from inboxd.domain.errors import InboxError, InvalidArgument, RefusedEvent, TooManyRequests
from inboxd.domain.trace_context import trace_context_from_headers
from inboxd.domain.vocabulary import ClaimRequest, Completion
from inboxd.observability import spans, tracing
from inboxd.usecases.inbox import Inbox
from inboxd_client.v1 import inbox_pb2

MAX_BATCH_EVENTS = 500
MAX_BATCH_COMPLETIONS = 500
# A waiting Claim answers this long before the caller's deadline.
DEADLINE_MARGIN_SECONDS = 0.2

Context = grpc.aio.ServicerContext[Any, Any]


class InboxServicer(AcceptStreaming, WorkStreaming):
    """Methods are named after the RPCs; `api.handlers` routes to them (the streams live in rooms of their own)."""

    def __init__(self, inbox: Inbox) -> None:
        self.inbox = inbox
        self._waiting: Counter[str] = Counter()

    async def Accept(self, request: inbox_pb2.AcceptRequest, context: Context) -> inbox_pb2.AcceptResponse:
        call_trace = trace_context_from_headers(context.invocation_metadata())
        event = convert.new_event(request, self.inbox.settings.max_payload_bytes, call_trace)
        try:
            [result] = await self.inbox.accept([event])
        except RefusedEvent as exc:
            raise convert.refusal(exc, [event]) from None
        if tracing.TRACER is not None:
            spans.accept_answered(spans.current_span(), result)
        return convert.accept_response(result)

    async def AcceptBatch(
        self, request: inbox_pb2.AcceptBatchRequest, context: Context
    ) -> inbox_pb2.AcceptBatchResponse:
        convert.check_batch_size("events", len(request.events), MAX_BATCH_EVENTS)
        events = []
        call_trace = trace_context_from_headers(context.invocation_metadata())
        for index, item in enumerate(request.events):
            try:
                events.append(convert.new_event(item, self.inbox.settings.max_payload_bytes, call_trace))
            except InvalidArgument as exc:
                raise InvalidArgument(f"events[{index}].{exc.field}", exc.problem) from None
        try:
            results = await self.inbox.accept(events)
        except RefusedEvent as exc:
            refusal = convert.refusal(exc, events)
            field = refusal.field if exc.index is None else f"events[{exc.index}].{refusal.field}"
            raise InvalidArgument(field, refusal.problem) from None
        if tracing.TRACER is not None:
            spans.batch_answered(spans.current_span(), results)
        return inbox_pb2.AcceptBatchResponse(results=convert.accept_responses(results))

    async def Claim(self, request: inbox_pb2.ClaimRequest, context: Context) -> inbox_pb2.ClaimResponse:
        claim = convert.claim_request(request)
        if len(request.completions) > MAX_BATCH_COMPLETIONS:
            raise InvalidArgument(
                "completions", f"holds {len(request.completions)} completions; send at most {MAX_BATCH_COMPLETIONS}"
            )
        caller = current_caller()
        if not claim.namespaces and not claim.namespace_patterns and not caller.all_namespaces:
            claim = replace(claim, namespace_patterns=caller.like_patterns())
        claim = _within_deadline(claim, context)
        with self._waiting_slot(caller.name) if claim.wait else contextlib.nullcontext():
            completed: list[inbox_pb2.CompleteResult] = []
            if request.completions:
                # The worker's previous batch first: committed before this Claim
                # looks, so a worker's whole cycle is one call instead of two.
                completed = await self._complete_items(request.completions)
                claim = _within_deadline(claim, context)
            batch = await self.inbox.claim(claim)
        if tracing.TRACER is not None:
            spans.handed_out(batch.events, spans.current_span())
        return inbox_pb2.ClaimResponse(
            events=[convert.claimed_event_to_proto(e) for e in batch.events], completion_results=completed
        )

    @contextlib.contextmanager
    def _waiting_slot(self, caller: str) -> Iterator[None]:
        """Bounds the long-polls one caller holds, so one worker cannot starve the rest."""
        limit = self.inbox.settings.max_waiting_claims_per_caller
        if self._waiting[caller] >= limit:
            raise TooManyRequests(
                f"{caller!r} already holds {limit} waiting Claims; claim with wait=0 or fewer pollers"
            )
        self._waiting[caller] += 1
        try:
            yield
        finally:
            self._waiting[caller] -= 1
            if not self._waiting[caller]:
                del self._waiting[caller]

    async def RenewLease(self, request: inbox_pb2.RenewLeaseRequest, context: Context) -> inbox_pb2.RenewLeaseResponse:
        fence = convert.fence(request)
        lease = convert.lease_from_proto("lease", request.HasField("lease"), request.lease)
        expires = await self.inbox.renew_lease(fence, lease)
        return inbox_pb2.RenewLeaseResponse(lease_expires_at=convert.instant_to_proto(expires))

    async def Complete(self, request: inbox_pb2.CompleteRequest, context: Context) -> inbox_pb2.CompleteResponse:
        fence = convert.fence(request)
        disposition, reason = convert.disposition(request)
        await self.inbox.complete(fence, disposition, reason)
        return inbox_pb2.CompleteResponse()

    async def CompleteBatch(
        self, request: inbox_pb2.CompleteBatchRequest, context: Context
    ) -> inbox_pb2.CompleteBatchResponse:
        convert.check_batch_size("completions", len(request.completions), MAX_BATCH_COMPLETIONS)
        return inbox_pb2.CompleteBatchResponse(results=await self._complete_items(request.completions))

    async def _complete_items(self, items: Sequence[inbox_pb2.CompleteRequest]) -> list[inbox_pb2.CompleteResult]:
        """A CompleteBatch's items (or a Claim's), each judged alone: one result each, in order."""
        caller = current_caller()
        count = len(items)
        outcomes: list[InboxError | None] = [None] * count
        accepted: list[tuple[int, Completion]] = []
        for index, item in enumerate(items):
            # Judged alone, in the order a lone Complete is: its namespace
            # grant (the interceptor checked only the scope), then its fields.
            try:
                caller.require_namespace(item.namespace, f"completions[{index}].namespace")
                accepted.append((index, convert.completion(item)))
            except InvalidArgument as exc:
                outcomes[index] = InvalidArgument(f"completions[{index}].{exc.field}", exc.problem)
            except InboxError as exc:
                outcomes[index] = exc
        if accepted:
            done = await self.inbox.complete_many([c for _, c in accepted])
            for (index, _), outcome in zip(accepted, done, strict=True):
                outcomes[index] = outcome
        return [convert.completion_result(o) for o in outcomes]

    async def Fail(self, request: inbox_pb2.FailRequest, context: Context) -> inbox_pb2.FailResponse:
        fence = convert.fence(request)
        retry_after = convert.retry_after(request)
        result = await self.inbox.fail(fence, request.error, permanent=request.permanent, retry_after=retry_after)
        response = inbox_pb2.FailResponse(state=convert.EVENT_STATE_TO_PROTO[result.state])
        if result.next_attempt_at is not None:
            response.next_attempt_at.CopyFrom(convert.instant_to_proto(result.next_attempt_at))
        return response

    async def Release(self, request: inbox_pb2.ReleaseRequest, context: Context) -> inbox_pb2.ReleaseResponse:
        await self.inbox.release(convert.fence(request))
        return inbox_pb2.ReleaseResponse()

    async def RecordActionOutcome(
        self, request: inbox_pb2.RecordActionOutcomeRequest, context: Context
    ) -> inbox_pb2.RecordActionOutcomeResponse:
        fence = convert.fence(request)
        action, state, external_ref, detail = convert.action_outcome(request)
        record = await self.inbox.record_action(fence, action, state, external_ref=external_ref, detail=detail)
        return inbox_pb2.RecordActionOutcomeResponse(action=convert.action_record_to_proto(record))


def _within_deadline(claim: ClaimRequest, context: Context) -> ClaimRequest:
    """Answer (empty-handed) before the caller's deadline rather than be cut off mid-claim."""
    remaining = context.time_remaining()
    if remaining is not None and claim.wait.total_seconds() > remaining - DEADLINE_MARGIN_SECONDS:
        return replace(claim, wait=timedelta(seconds=max(0.0, remaining - DEADLINE_MARGIN_SECONDS)))
    return claim
