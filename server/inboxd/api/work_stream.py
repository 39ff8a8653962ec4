"""Work: a worker's whole cycle on one open stream, a subscription, credit, pushed events and fenced calls.

The first message subscribes, judged as a Claim's namespaces, event types,
lease and worker id are judged (the same conversion, the same grants); its
answer says the lease and the heartbeat. Then the worker's messages carry
credit and fenced calls, and the server's carry pushed events and each
call's result by its sequence. A call runs the unary method itself (its
namespace grant as the unary wrapper checks it, then the servicer's own
method), so every call on the stream gets exactly the unary status code; a
refusal is its answer, an `ItemStatus`, and the stream goes on.

As AcceptStream (api/accept_stream.py), the handler is an async generator
fed by tasks: a reader, which takes a message only while the stream has
room for one more unanswered call (`work_call_window`), and a pusher, which
claims within the credit (usecases/streams.py). Each call is a task of its
own, answered in completion order; Complete's share group commit.

While tracing is on, each call has a span named as the unary call it runs
(a child of the message's `trace_context`, else of the stream's metadata,
linked to the stream's span), and each pushed event with a stored context a
`receive` span in the delivery's trace (observability/spans.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

import grpc
from opentelemetry.trace import use_span

from inboxd.api import convert
from inboxd.api.admission import LIST_LIMITS
from inboxd.api.auth import authorize_namespaces
from inboxd.api.identity import current_caller
from inboxd.api.rpc_spans import start_item_span, work_call_trace
from inboxd.api.status import INTERNAL_ITEM, item_status, status_for, within
from inboxd.config.tokens import Caller
from inboxd.domain.errors import InboxError, InvalidArgument, Unavailable
from inboxd.domain.trace_context import trace_context_from_headers
from inboxd.domain.vocabulary import ClaimRequest, ClaimToken, EventKey, Fence, Namespace
from inboxd.observability import spans, tracing
from inboxd.usecases.inbox import Inbox
from inboxd.usecases.streams import WorkSession
from inboxd_client.v1 import inbox_pb2

log = logging.getLogger(__name__)

Context = grpc.aio.ServicerContext[Any, Any]

_INBOX = "/inboxd.v1.InboxService/"
# A call's field of WorkRequest -> the unary method that judges it.
CALLS = {
    "complete": "Complete",
    "complete_batch": "CompleteBatch",
    "fail": "Fail",
    "release": "Release",
    "renew_lease": "RenewLease",
    "record_action_outcome": "RecordActionOutcome",
}
# Calls whose OK ends the claim: the stream no longer holds it.
_ENDING = frozenset({"complete", "fail", "release"})
# Codes that say the claim is not (or no longer) the event's current one.
_GONE = frozenset({grpc.StatusCode.ABORTED.value[0], grpc.StatusCode.NOT_FOUND.value[0]})
_OK = grpc.StatusCode.OK.value[0]
# Unanswered calls one stream may hold (each at most a CompleteBatch's 4 MiB).
WORK_CALL_WINDOW = 128


@dataclass(frozen=True, slots=True)
class _Out:
    """A response queued to be sent; `sequence` set for a call's result that frees room in the window."""

    response: inbox_pb2.WorkResponse
    sequence: int | None = None
    owns: bool = True


@dataclass(frozen=True, slots=True)
class _Drain:
    """The server is stopping: the worker is told (`draining`, the grace left); the stream ends as soon
    as it holds nothing and owes no answer, or at the grace's end (what it holds then is released)."""


@dataclass(frozen=True, slots=True)
class _End:
    """The stream ends: OK after a half-close (error None), or with `error`."""

    error: Exception | None


class WorkStreaming:
    """InboxServicer's Work; the servicer holds `inbox` and the unary methods each call runs."""

    inbox: Inbox
    work_call_window: int = WORK_CALL_WINDOW

    async def Work(
        self, requests: AsyncIterator[inbox_pb2.WorkRequest], context: Context
    ) -> AsyncIterator[inbox_pb2.WorkResponse]:
        caller = current_caller()
        try:
            first = await anext(requests)
        except StopAsyncIteration:
            return
        if first.WhichOneof("call") != "subscribe":
            raise InvalidArgument("subscribe", "the first message of a Work stream must be a subscription")
        subscription = _subscription(first.subscribe, caller)
        session = self.inbox.streams.open(subscription, caller.name)
        stream = _WorkStream(self, session, caller, context, self.work_call_window)
        try:
            session.add_credit(first.credit)
            yield inbox_pb2.WorkResponse(
                subscribed=inbox_pb2.WorkSubscribed(
                    lease=convert.duration_to_proto(subscription.lease),
                    heartbeat=convert.duration_to_proto(session.heartbeat),
                )
            )
            stream.start(requests)
            async for response in stream.answers():
                yield response
        finally:
            stream.stop()
            self.inbox.streams.close(session, stream.calls)


def _subscription(request: inbox_pb2.WorkSubscription, caller: Caller) -> ClaimRequest:
    """The subscription as a Claim's filter and lease, checked in a Claim's order; errors name `subscribe.*`."""
    as_claim = inbox_pb2.ClaimRequest(
        namespaces=request.namespaces, event_types=request.event_types, worker_id=request.worker_id
    )
    if request.HasField("lease"):
        as_claim.lease.CopyFrom(request.lease)
    try:
        for field, most in LIST_LIMITS["Claim"]:
            convert.check_batch_size(field, len(getattr(as_claim, field)), most, least=0)
        authorize_namespaces(caller, _INBOX + "Claim", as_claim)
        claim = convert.claim_request(as_claim)
    except InboxError as exc:
        raise within("subscribe", exc) from None
    # A namespace named twice takes one turn.
    claim = replace(claim, namespaces=tuple(dict.fromkeys(claim.namespaces)))
    if not claim.namespaces and not claim.namespace_patterns and not caller.all_namespaces:
        claim = replace(claim, namespace_patterns=caller.like_patterns())
    return claim


class _WorkStream:
    """One open Work stream past its subscription: what it has read and not answered."""

    def __init__(self, servicer: Any, session: WorkSession, caller: Caller, context: Context, window: int) -> None:
        self._servicer = servicer
        self._session = session
        self._caller = caller
        self._context = context
        self._room = asyncio.Semaphore(window)
        self._unanswered: set[int] = set()
        self._queue: asyncio.Queue[_Out | _Drain | _End] = asyncio.Queue()
        self._draining = False
        # Set while no push waits in the queue or in grpc's hands.
        self._push_sent = asyncio.Event()
        self._push_sent.set()
        self.calls: set[asyncio.Task[Any]] = set()
        self._reader: asyncio.Task[None] | None = None
        self._pusher: asyncio.Task[None] | None = None
        # While tracing is on: the stream's span (current where the handler runs) and its metadata's context.
        self._span = spans.current_span() if tracing.TRACER is not None else None
        self._stream_trace = None if self._span is None else trace_context_from_headers(context.invocation_metadata())

    def start(self, requests: AsyncIterator[inbox_pb2.WorkRequest]) -> None:
        self._reader = asyncio.create_task(self._read(requests))
        self._pusher = asyncio.create_task(self._push())
        self._session.on_drain = self._drain
        if self._servicer.inbox.streams.draining:
            self._drain()  # subscribed as the server began to stop

    def _drain(self) -> None:
        if self._pusher is not None:
            self._pusher.cancel()
        self._session.stop_pushing()
        self._draining = True
        self._queue.put_nowait(_Drain())

    def _drained(self) -> bool:
        # A call in flight is a sequence unanswered (its task may linger a moment after its answer).
        return self._draining and not self._session.held and not self._unanswered

    def stop(self) -> None:
        """The stream ended: stop reading and pushing (calls in flight finish; their claims end after them)."""
        for task in (self._reader, self._pusher):
            if task is not None:
                task.cancel()

    async def _read(self, requests: AsyncIterator[inbox_pb2.WorkRequest]) -> None:
        try:
            while True:
                # Room first: a message not read stays in the transport, held back by flow control.
                await self._room.acquire()
                try:
                    request = await anext(requests)
                except StopAsyncIteration:
                    break
                self._session.heard()
                if request.stop_pushing:
                    self._session.stop_pushing()
                self._session.add_credit(request.credit)
                name = request.WhichOneof("call")
                if name is None:
                    self._room.release()
                    continue
                if name == "subscribe":
                    raise InvalidArgument("subscribe", "a Work stream takes one subscription, its first message")
                self._take(request.sequence, name, getattr(request, name), request)
            # Half-closed: no more pushes; every call answered, then what is still held ends, then OK.
            if self._pusher is not None:
                self._pusher.cancel()
                await asyncio.wait([self._pusher])
            if self.calls:
                await asyncio.wait(set(self.calls))
            self._session.stop_heartbeat()
            await self._session.end()
            self._queue.put_nowait(_End(None))
        except Exception as exc:  # noqa: BLE001 - ends the stream with it, in the handler's task
            self._queue.put_nowait(_End(exc))

    def _take(self, sequence: int, name: str, request: Any, message: inbox_pb2.WorkRequest) -> None:
        if sequence in self._unanswered:
            refused = InvalidArgument("sequence", f"{sequence} is already in flight on this stream, unanswered")
            result = inbox_pb2.WorkResult(sequence=sequence, error=item_status(refused))
            self._queue.put_nowait(_Out(inbox_pb2.WorkResponse(result=result), sequence, owns=False))
            return
        self._unanswered.add(sequence)
        task: asyncio.Task[Any]
        if self._span is None:
            task = asyncio.create_task(self._call(sequence, name, request))
        else:
            task = asyncio.create_task(self._traced_call(sequence, name, request, message))
        self.calls.add(task)
        task.add_done_callback(self.calls.discard)

    async def _traced_call(self, sequence: int, name: str, request: Any, message: inbox_pb2.WorkRequest) -> None:
        assert self._span is not None
        method = CALLS[name]
        attributes = spans.about_request({}, method, request) if method in spans.EVENT_OPERATIONS else {}
        parent = work_call_trace(message, self._stream_trace)
        span = start_item_span(self._span, "Work", method, parent, sequence=sequence, attributes=attributes)
        # Current in this call's own task: what the call starts (a group commit, its logs) finds it.
        with use_span(span, end_on_exit=True):
            result = await self._call(sequence, name, request)
            spans.set_rpc_code(span, result.error.code if result.HasField("error") else _OK, result.error.message)

    async def _call(self, sequence: int, name: str, request: Any) -> inbox_pb2.WorkResult:
        """Runs the unary method on the call; its answer, or its refusal, is the call's result (and returned)."""
        method = CALLS[name]
        try:
            authorize_namespaces(self._caller, _INBOX + method, request)
            response = await getattr(self._servicer, method)(request, self._context)
        except InboxError as exc:
            refused = within(name, exc)
            if status_for(refused).value[0] in _GONE:
                self._settle(request)
            result = inbox_pb2.WorkResult(sequence=sequence, error=item_status(refused))
        except Exception:
            log.exception("Work stream call %d (%s) failed", sequence, name)
            result = inbox_pb2.WorkResult(sequence=sequence, error=INTERNAL_ITEM)
        else:
            if name in _ENDING:
                self._settle(request)
            elif name == "complete_batch":
                for item, outcome in zip(request.completions, response.results, strict=True):
                    if outcome.code == _OK or outcome.code in _GONE:
                        self._settle(item)
            result = inbox_pb2.WorkResult(sequence=sequence, **{name: response})
        self._queue.put_nowait(_Out(inbox_pb2.WorkResponse(result=result), sequence))
        return result

    def _settle(self, request: Any) -> None:
        """The call ended the claim it names, or found it not current: the stream stops holding it."""
        self._session.settled(
            Fence(Namespace(request.namespace), EventKey(request.event_key), ClaimToken(request.claim_token))
        )

    async def _push(self) -> None:
        try:
            while True:
                # One push at a time in the transport: a worker that gives credit and never reads
                # makes the server hold one message of events, not all it could claim.
                await self._push_sent.wait()
                try:
                    events = await self._session.next_events()
                except InboxError as exc:
                    # The database may be down: the stream stays, and looks again after a poll's interval.
                    log.warning("Work stream push failed: %s", exc)
                    await asyncio.sleep(self._session.retry_seconds)
                    continue
                if self._span is not None:
                    spans.handed_out(events, self._span)
                pushed = inbox_pb2.WorkEvents(events=[convert.claimed_event_to_proto(e) for e in events])
                self._push_sent.clear()
                self._queue.put_nowait(_Out(inbox_pb2.WorkResponse(events=pushed)))
        except Exception as exc:
            log.exception("Work stream pushes failed")
            self._queue.put_nowait(_End(exc))

    async def answers(self) -> AsyncIterator[inbox_pb2.WorkResponse]:
        """Pushed events and results in the order they came; each result sent frees its room."""
        while True:
            item = await self._queue.get()
            if isinstance(item, _End):
                if item.error is not None:
                    raise item.error
                return
            if isinstance(item, _Drain):
                grace = convert.duration_to_proto(timedelta(seconds=self._servicer.inbox.streams.grace_left()))
                yield inbox_pb2.WorkResponse(draining=inbox_pb2.WorkDraining(grace=grace))
            else:
                yield item.response
                if item.sequence is None:
                    self._push_sent.set()
                else:
                    if item.owns:
                        self._unanswered.discard(item.sequence)
                    self._room.release()
            if self._drained():
                # The worker settled everything: it reconnects elsewhere, nothing lost, nothing held.
                raise Unavailable("the server is shutting down: open the Work stream again")
