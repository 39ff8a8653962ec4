"""Accept on inboxd (over a pool of AcceptStreams, or unary), and the HTTP answer the provider gets for its outcome.

The rule that matters: 2xx only after Accept (or the stream's item) answered OK. ACCEPTED, DUPLICATE
and CONFLICT all mean "durably accepted", so all three are 2xx. Anything that
may not have been committed (UNAVAILABLE, a passed deadline) is 503, so the
provider retries and the retry finds the row or creates it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass

import grpc
import grpc.aio

from inboxd_client.errors import InboxError
from inboxd_client.v1 import inbox_pb2, types_pb2
from inboxd_edge.keys import ResolvedEvent
from inboxd_edge.stream_pool import StreamEnded, StreamPool

log = logging.getLogger("inboxd_edge")

_OUTCOMES: Mapping[int, str] = {
    inbox_pb2.ACCEPT_OUTCOME_ACCEPTED: "accepted",
    inbox_pb2.ACCEPT_OUTCOME_DUPLICATE: "duplicate",
    inbox_pb2.ACCEPT_OUTCOME_CONFLICT: "conflict",
}
# Nothing durable can be assumed: the provider must retry.
_RETRYABLE = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.CANCELLED,
}

# inboxd refused the edge's own token (unknown, or without the accept scope or the namespace): words of their
# own, apart from the 401 "unauthenticated" a provider's bad signature gets, since the fix is the edge's
# configuration, not the provider's request.
_REFUSED_EDGE = {
    grpc.StatusCode.UNAUTHENTICATED: "edge_unauthenticated",
    grpc.StatusCode.PERMISSION_DENIED: "edge_permission_denied",
}

AcceptCall = grpc.aio.UnaryUnaryMultiCallable[inbox_pb2.AcceptRequest, inbox_pb2.AcceptResponse]


@dataclass(frozen=True)
class Answer:
    """The HTTP status for the provider, and a one-word outcome for the response body and the log."""

    status: int
    outcome: str


def answer_for_error(code: grpc.StatusCode) -> Answer:
    """The answer when Accept failed with `code`."""
    if code in _RETRYABLE:
        return Answer(503, code.name.lower())
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        # inboxd refused the event itself (JSON jsonb cannot hold, a content type it refuses): a retry cannot help.
        return Answer(400, "rejected")
    # UNAUTHENTICATED, PERMISSION_DENIED, INTERNAL...: the edge or inboxd is misconfigured.
    # 500 keeps the provider retrying until an operator fixes it.
    return Answer(500, _REFUSED_EDGE.get(code, code.name.lower()))


class Forwarder:
    """Forwards each event with a deadline and, when configured, a bearer token: over `pool`, or unary Accept.

    With `pool` and `fallback`, a server that answers the stream UNIMPLEMENTED
    switches the edge to unary Accept for good (said once, at INFO); an item
    whose stream ended for good under it (a message over the stream's size,
    a refused token) is sent once as a unary Accept, so the provider hears
    what today's unary forward would answer. Without `fallback` the stream is
    forced: its refusal is the answer.
    """

    def __init__(
        self,
        channel: grpc.aio.Channel,
        *,
        deadline: float,
        token: str | None = None,
        pool: StreamPool | None = None,
        fallback: bool = True,
    ) -> None:
        self._accept: AcceptCall = channel.unary_unary(
            "/inboxd.v1.InboxService/Accept",
            request_serializer=inbox_pb2.AcceptRequest.SerializeToString,
            response_deserializer=inbox_pb2.AcceptResponse.FromString,
        )
        self._deadline = deadline
        self._metadata = (("authorization", f"Bearer {token}"),) if token else None
        self.pool = pool
        self._fallback = fallback

    @property
    def streaming(self) -> bool:
        """True while deliveries go over AcceptStream."""
        return self.pool is not None

    async def accept(self, event: ResolvedEvent, trace_context: types_pb2.TraceContext | None = None) -> Answer:
        """Accepts the event and says what to answer the provider; `trace_context` is the delivery's trace."""
        request = inbox_pb2.AcceptRequest(
            namespace=event.namespace,
            event_key=event.event_key,
            event_type=event.event_type,
            payload=event.payload,
            content_type=event.content_type,
            metadata=dict(event.metadata),
            message_id=event.message_id,
            ordering_key=event.ordering_key,
        )
        if trace_context is not None:
            # The field, not the call's metadata: a stream carries many deliveries, each of its own trace.
            request.trace_context.CopyFrom(trace_context)
        pool = self.pool
        if pool is None:
            return await self._unary(request, self._deadline)
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            response = await pool.accept(request, timeout=self._deadline)
        except StreamEnded as ended:
            if not self._fallback:
                return answer_for_error(ended.error.code)
            if ended.error.code is grpc.StatusCode.UNIMPLEMENTED:
                await self._stop_streaming(pool)
            # Not answered by the stream: judged as a unary Accept, within what is left of the deadline.
            return await self._unary(request, max(0.0, self._deadline - (loop.time() - started)))
        except InboxError as exc:
            if self.pool is not pool:
                # The pool closed under it as the edge fell back to unary: sent again, as a unary Accept.
                return await self._unary(request, max(0.0, self._deadline - (loop.time() - started)))
            return answer_for_error(exc.code)
        return _answer(response)

    async def _unary(self, request: inbox_pb2.AcceptRequest, deadline: float) -> Answer:
        metadata = self._metadata
        if request.HasField("trace_context"):
            # The field says it already; the headers too, for anything between the edge and inboxd that traces.
            metadata = (*(metadata or ()), *_trace_headers(request.trace_context))
        try:
            response = await self._accept(request, timeout=deadline, metadata=metadata)
        except grpc.aio.AioRpcError as exc:
            return answer_for_error(exc.code())
        return _answer(response)

    async def _stop_streaming(self, pool: StreamPool) -> None:
        """Unary Accept from now on: this inboxd does not serve AcceptStream."""
        if self.pool is pool:
            self.pool = None
            log.info("inboxd does not serve AcceptStream (UNIMPLEMENTED): forwarding with unary Accept from now on")
            await pool.close()

    async def close(self) -> None:
        """Half-closes the streams once their items are answered."""
        if self.pool is not None:
            await self.pool.close()


def _trace_headers(context: types_pb2.TraceContext) -> tuple[tuple[str, str], ...]:
    """W3C's two headers for the unary call's metadata (no `tracestate` when it is empty)."""
    if context.tracestate:
        return (("traceparent", context.traceparent), ("tracestate", context.tracestate))
    return (("traceparent", context.traceparent),)


def _answer(response: inbox_pb2.AcceptResponse) -> Answer:
    outcome = _OUTCOMES.get(response.outcome)
    if outcome is None:
        # An OK without a known outcome proves nothing was committed: never 2xx on it.
        return Answer(500, "unknown_outcome")
    return Answer(200, outcome)
