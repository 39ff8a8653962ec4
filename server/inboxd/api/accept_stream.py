"""AcceptStream: many Accepts on one open stream, each answered by its sequence after its commit.

A unary call costs the server some 250 µs of gRPC's own machinery; a message
on an open stream about a quarter of that (TOOLCHAIN.md). Each item is judged
exactly as a unary Accept: its namespace against the caller's grants, then
its fields (`convert.new_event`), then `Inbox.accept`, so the items of every
stream and every unary caller share the same group commits. An item's
refusal is its answer (an `ItemStatus` with the code Accept would have
ended with); only what concerns the stream whole ends it.

The handler is an async generator (cheaper than context.read/write, as
measured) fed by a reader task: the reader takes a message only while the
stream holds fewer than `accept_stream_window` unanswered items, so a
stream that outruns its commits stops being read (HTTP/2 flow control then
holds the client) and one stream holds at most window x the payload limit.

While tracing is on, each item has a span of its own (named as the unary
Accept it stands for, a child of the item's context, linked to the
stream's), current when the item goes to group commit and ended with its
answer.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpc
from opentelemetry.trace import Span, use_span

from inboxd.api import convert
from inboxd.api.identity import current_caller
from inboxd.api.rpc_spans import start_item_span
from inboxd.api.status import INTERNAL_ITEM, item_status, within
from inboxd.config.tokens import Caller
from inboxd.domain.errors import InboxError, InvalidArgument, RefusedEvent
from inboxd.domain.trace_context import TraceContext, trace_context_from_headers
from inboxd.domain.vocabulary import AcceptResult, NewEvent
from inboxd.observability import spans, tracing
from inboxd.usecases.inbox import Inbox
from inboxd_client.v1 import inbox_pb2

log = logging.getLogger(__name__)

Context = grpc.aio.ServicerContext[Any, Any]


@dataclass(frozen=True, slots=True)
class _Answer:
    """One item's answer, queued to be sent; `owns` False: a reused sequence's refusal."""

    sequence: int
    owns: bool
    response: inbox_pb2.AcceptStreamResponse


@dataclass(frozen=True, slots=True)
class _End:
    """Reading ended: on a half-close (error None) once every item read is answered, or on `error`."""

    error: Exception | None


class AcceptStreaming:
    """InboxServicer's AcceptStream; the servicer holds `inbox`."""

    inbox: Inbox

    async def AcceptStream(
        self, requests: AsyncIterator[inbox_pb2.AcceptStreamRequest], context: Context
    ) -> AsyncIterator[inbox_pb2.AcceptStreamResponse]:
        stream = _Stream(self.inbox, current_caller(), trace_context_from_headers(context.invocation_metadata()))
        reader = asyncio.create_task(stream.read(requests))
        try:
            async for response in stream.answers():
                yield response
        finally:
            reader.cancel()
            stream.abandon()


class _Stream:
    """One open AcceptStream: what it has read and not yet answered."""

    def __init__(self, inbox: Inbox, caller: Caller, call_trace: TraceContext | None) -> None:
        self._inbox = inbox
        self._caller = caller
        # The stream's metadata context: each item's own trace_context field, when set, is the item's.
        self._call_trace = call_trace
        self._room = asyncio.Semaphore(inbox.settings.accept_stream_window)
        self._unanswered: set[int] = set()
        self._queue: asyncio.Queue[_Answer | _End] = asyncio.Queue()
        # Each sound item's group-commit future; its answer is queued by a callback, not a task.
        self._accepting: set[asyncio.Future[list[AcceptResult]]] = set()
        self._abandoned = False
        # Read and not yet sent (the metric's share of this stream).
        self._held = 0
        # The stream's span (current where the handler runs), for its items' spans to link to.
        self._span = spans.current_span() if tracing.TRACER is not None else None

    async def read(self, requests: AsyncIterator[inbox_pb2.AcceptStreamRequest]) -> None:
        """Takes items while the window has room; after a half-close, ends once all are answered."""
        try:
            while True:
                # Room first: a message not read stays in the transport, held back by flow control.
                await self._room.acquire()
                try:
                    request = await anext(requests)
                except StopAsyncIteration:
                    break
                self._held += 1
                self._inbox.observer.accept_stream_held(1)
                self._take(request)
            if self._accepting:
                # Each future's answering callback was added before asyncio.wait's own,
                # so it runs first: the end is queued after every answer.
                await asyncio.wait(set(self._accepting))
            self._queue.put_nowait(_End(None))
        except Exception as exc:  # noqa: BLE001 - ends the stream with it, in the handler's task
            self._queue.put_nowait(_End(exc))

    def _take(self, request: inbox_pb2.AcceptStreamRequest) -> None:
        """Judges one item as a unary Accept would; a sound one goes to group commit, answered when it commits."""
        sequence = request.sequence
        if sequence in self._unanswered:
            # Its own answer: the earlier item with this sequence is still answered, by its own.
            refused = InvalidArgument("sequence", f"{sequence} is already in flight on this stream, unanswered")
            self._queue.put_nowait(_Answer(sequence, False, _refusal(sequence, refused)))
            return
        self._unanswered.add(sequence)
        try:
            if not request.HasField("accept"):
                raise InvalidArgument("accept", "is required: each item carries one AcceptRequest")
            # In a unary Accept's order: the namespace's grant, then the fields.
            self._caller.require_namespace(request.accept.namespace, "accept.namespace")
            event = convert.new_event(request.accept, self._inbox.settings.max_payload_bytes, self._call_trace)
        except InboxError as exc:
            refusal = _refusal(sequence, _in_accept(exc))
            if self._span is not None:
                self._item_span(request, None).end_refused(refusal)
            self._queue.put_nowait(_Answer(sequence, True, refusal))
            return
        if self._span is not None:
            self._accept_traced(sequence, event, self._item_span(request, event))
            return
        committed = self._inbox.accept_soon([event])
        self._accepting.add(committed)
        committed.add_done_callback(functools.partial(self._answer, sequence, event))

    def _item_span(self, request: inbox_pb2.AcceptStreamRequest, event: NewEvent | None) -> _ItemSpan:
        assert self._span is not None
        accept = request.accept
        attributes = spans.about_request({}, "Accept", accept) if accept.namespace else {}
        parent = event.trace_context if event is not None else self._call_trace
        span = start_item_span(
            self._span, "AcceptStream", "Accept", parent, sequence=request.sequence, attributes=attributes
        )
        return _ItemSpan(span)

    def _accept_traced(self, sequence: int, event: NewEvent, item: _ItemSpan) -> None:
        # Current while submitted: the group commit's span and the item's link to each other.
        with use_span(item.span, end_on_exit=False):
            committed = self._inbox.accept_soon([event])
        self._accepting.add(committed)

        def answer(committed: asyncio.Future[list[AcceptResult]]) -> None:
            item.end_answered(committed, self._answer(sequence, event, committed))

        committed.add_done_callback(answer)

    def _answer(
        self, sequence: int, event: NewEvent, committed: asyncio.Future[list[AcceptResult]]
    ) -> inbox_pb2.AcceptStreamResponse | None:
        """Queues the item's answer once its group committed (or failed); nothing once the stream ended."""
        self._accepting.discard(committed)
        if committed.cancelled():
            return None
        failure = committed.exception()  # retrieved even when abandoned: no "never retrieved" warning
        if self._abandoned:
            return None
        try:
            if failure is not None:
                raise failure
            [result] = committed.result()
        except RefusedEvent as exc:
            response = _refusal(sequence, _in_accept(convert.refusal(exc, [event])))
        except InboxError as exc:
            response = _refusal(sequence, exc)
        except Exception:
            # One item's surprise must not end its neighbours' stream; it is logged, the item answered.
            log.exception("AcceptStream item %d failed", sequence)
            response = inbox_pb2.AcceptStreamResponse(sequence=sequence, error=INTERNAL_ITEM)
        else:
            response = inbox_pb2.AcceptStreamResponse(sequence=sequence, accepted=convert.accept_response(result))
        self._queue.put_nowait(_Answer(sequence, True, response))
        return response

    async def answers(self) -> AsyncIterator[inbox_pb2.AcceptStreamResponse]:
        """The answers in completion order; each sent frees its room in the window."""
        while True:
            item = await self._queue.get()
            if isinstance(item, _End):
                if item.error is not None:
                    raise item.error
                return
            yield item.response
            # Back here once grpc took the answer: the item is answered.
            if item.owns:
                self._unanswered.discard(item.sequence)
            self._held -= 1
            self._inbox.observer.accept_stream_held(-1)
            self._room.release()

    def abandon(self) -> None:
        """The stream ended: answer nothing more in flight (group commit still commits it, unacknowledged)."""
        self._abandoned = True
        self._accepting.clear()
        if self._held:
            self._inbox.observer.accept_stream_held(-self._held)
            self._held = 0


@dataclass(frozen=True, slots=True)
class _ItemSpan:
    """An item's span while tracing is on: ended with the item's answer."""

    span: Span

    def end_refused(self, refusal: inbox_pb2.AcceptStreamResponse) -> None:
        spans.set_rpc_code(self.span, refusal.error.code, refusal.error.message)
        self.span.end()

    def end_answered(
        self, committed: asyncio.Future[list[AcceptResult]], response: inbox_pb2.AcceptStreamResponse | None
    ) -> None:
        if response is None:  # cancelled, or the stream ended before the commit: never answered
            spans.set_rpc_code(self.span, grpc.StatusCode.CANCELLED.value[0])
        elif response.HasField("error"):
            spans.set_rpc_code(self.span, response.error.code, response.error.message)
        else:
            spans.accept_answered(self.span, committed.result()[0])
            spans.set_rpc_code(self.span, grpc.StatusCode.OK.value[0])
        self.span.end()


def _in_accept(exc: InboxError) -> InboxError:
    return within("accept", exc)


def _refusal(sequence: int, exc: InboxError) -> inbox_pb2.AcceptStreamResponse:
    return inbox_pb2.AcceptStreamResponse(sequence=sequence, error=item_status(exc))
