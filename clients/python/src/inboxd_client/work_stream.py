"""The client side of a Work stream: a worker's subscription, its credit, its fenced calls, the events pushed to it.

One open stream carries a worker's whole cycle, a quarter of a unary call's
cost per message. The first message subscribes; credit says how many more
events the worker can take, and the server pushes at most that many, the
moment they become claimable. Each fenced call (Complete, CompleteBatch,
Fail, Release, RenewLease, RecordActionOutcome) carries a sequence, and its
result comes back with it: the unary call's answer, or the status code the
unary call would have ended with, for that call alone.

The stream is the heartbeat: while it is open the server keeps the leases of
what it pushed alive. The Worker still renews a handler that outruns a third of
its lease (renewals.py, over this stream): an ABORTED renewal is how it hears
that its claim was taken over. When it breaks (UNAVAILABLE, a
dropped connection), the server ends those claims at once, so `on_broken`
tells the worker its events of that stream are lost; the stream is opened
again after a pause (`claim_backoff`) and subscribed anew. A call the broken
stream had not answered is sent again on the next one when a repeat is safe
(the retry column of `rpcs`: Complete, CompleteBatch, RenewLease,
RecordActionOutcome); a Fail or a Release fails with Unavailable instead,
since its claim ended with the stream whatever became of it.

A stopping server says so (`draining`, its grace): the stream stops crediting
and tells `on_draining(stream, grace)`; once the server ends it, it opens
again, crediting anew, on whichever server the channel reaches then.
"""

# `timeout` is each call's deadline, as the unary calls name it, not an asyncio timeout.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import grpc
from google.protobuf.message import Message

from inboxd_client import builders, rpcs
from inboxd_client.builders import Fenced
from inboxd_client.claim_backoff import TRANSIENT_CLAIM_ERRORS, ClaimPacer
from inboxd_client.connection import Metadata
from inboxd_client.errors import (
    DeadlineExceeded,
    InboxError,
    Unavailable,
    error_from_code,
    error_from_status,
)
from inboxd_client.fenced_requests import FencedRequests
from inboxd_client.trace_propagation import fill_trace_context, with_trace_metadata
from inboxd_client.v1 import inbox_pb2

R = TypeVar("R", bound=Message)

PATH = "/inboxd.v1.InboxService/Work"
METHOD = "Work"
# The WorkRequest field each fenced call travels in.
WORK_FIELDS: dict[rpcs.Rpc[Any], str] = {
    rpcs.COMPLETE: "complete",
    rpcs.COMPLETE_BATCH: "complete_batch",
    rpcs.FAIL: "fail",
    rpcs.RELEASE: "release",
    rpcs.RENEW_LEASE: "renew_lease",
    rpcs.RECORD_ACTION_OUTCOME: "record_action_outcome",
}
_CLOSE = None  # the writer's cue to half-close

OnEvents = Callable[[int, Sequence[inbox_pb2.ClaimedEvent]], None]
OnDraining = Callable[[int, float], None]


@dataclass(slots=True)
class _Call:
    """One fenced call waiting for its result, and the stream it was last written on."""

    request: inbox_pb2.WorkRequest
    answered: asyncio.Future[Any]
    resend: bool
    written_on: int = 0


class WorkStream(FencedRequests):
    """A worker's Work stream, kept open (and reopened after a break) from `open()` until `close()`.

    `free_slots()` says how many more events the worker can run now: the
    stream keeps its credit at that (at most the pacer's batch, which a
    push too big for the channel halves). `on_events(stream, events)` gets
    each push with the number of the stream that pushed it, and
    `on_broken(stream)` the number of a stream that broke, whose claims the
    server ended. `timeout` is each call's deadline, resends included.
    """

    def __init__(
        self,
        channel: grpc.aio.Channel,
        metadata: Metadata,
        subscription: inbox_pb2.WorkSubscription,
        *,
        timeout: float,
        free_slots: Callable[[], int],
        on_events: OnEvents,
        on_broken: Callable[[int], None],
        pacer: ClaimPacer,
        on_draining: OnDraining | None = None,
    ) -> None:
        self._open_call = channel.stream_stream(
            PATH,
            request_serializer=inbox_pb2.WorkRequest.SerializeToString,
            response_deserializer=inbox_pb2.WorkResponse.FromString,
        )
        self._metadata = metadata
        self._subscription = subscription
        self.timeout = timeout
        self._free_slots = free_slots
        self._on_events = on_events
        self._on_broken = on_broken
        self._pacer = pacer
        self._on_draining = on_draining
        # Set while the open stream's server drains: no credit on it (the next stream credits again).
        self._server_draining = False
        self._next_sequence = 1  # 0 is a message's "no call"
        self._unanswered: dict[int, _Call] = {}
        self._outbox: asyncio.Queue[inbox_pb2.WorkRequest | None] = asyncio.Queue()
        self._outstanding = 0  # credit given on the open stream, less the events it pushed
        self._crediting = True
        self._closing = False
        self._half_closed = asyncio.Event()
        self._broken: InboxError | None = None
        self.runner: asyncio.Task[None] | None = None
        # The number of the stream now open: 1 for the first, one more for each reopening.
        self.opened = 0
        # The server's answer to the open stream's subscription (its lease and heartbeat), once it came.
        self.subscribed: inbox_pb2.WorkSubscribed | None = None

    def open(self) -> WorkStream:
        if self.runner is None:
            self.runner = asyncio.create_task(self._run(), name="inboxd Work stream")
        return self

    def half_close(self, releasing: Sequence[Fenced] = ()) -> list[asyncio.Future[inbox_pb2.ReleaseResponse]]:
        """Stops crediting, sends a Release for each of `releasing`, then half-closes; the Releases' answers.

        The Releases and the half-close go out together: the server reads
        the half-close (no more pushes) before a Release commits, so the
        events given back are never pushed here again. The server answers
        what is outstanding, then ends the stream (`close` waits for that).
        """
        self.stop_crediting()
        sent = [self._send(rpcs.RELEASE, builders.release_request(event), None) for event in releasing]
        if not self._closing:
            self._closing = True
            self._half_closed.set()
            self._outbox.put_nowait(_CLOSE)
        return sent

    async def close(self) -> None:
        """Half-closes (unless `half_close` did) and waits for the stream's end."""
        if self.runner is None:
            return
        self.half_close()
        with contextlib.suppress(InboxError, asyncio.CancelledError):
            await self.runner

    def top_up(self) -> None:
        """Gives the server credit for the free slots it was not given yet (none once closing)."""
        if not self._crediting or self._server_draining or self._broken is not None:
            return
        more = self._wanted() - self._outstanding
        if more > 0:
            self._outstanding += more
            self._outbox.put_nowait(inbox_pb2.WorkRequest(credit=more))

    def stop_crediting(self) -> None:
        """No more credit, nor pushes (`stop_pushing`: the server drops what credit it holds, so an event
        released from now on is not pushed back here, to end with its attempt counted when the stream closes)."""
        if not self._crediting:
            return
        self._crediting = False
        if self.runner is not None and self._broken is None:
            self._outbox.put_nowait(inbox_pb2.WorkRequest(stop_pushing=True))

    def _wanted(self) -> int:
        free = self._free_slots()
        return self._pacer.max_events(free) if free > 0 else 0

    # -- the fenced calls (FencedRequests), each on the stream with a sequence --

    async def _call(self, rpc: rpcs.Rpc[R], request: Message, timeout: float | None) -> R:
        """Sends one call with a fresh sequence; its result's answer, or the call's own error raised."""
        return cast(R, await self._send(rpc, request, timeout))

    def _send(self, rpc: rpcs.Rpc[Any], message: Message, timeout: float | None) -> asyncio.Future[Any]:
        """Queues one call now, in order, with a fresh sequence; the future of its answer."""
        loop = asyncio.get_running_loop()
        answered: asyncio.Future[Any] = loop.create_future()
        if self._broken is not None:
            answered.set_exception(type(self._broken)(self._broken.details, method=self._broken.method))
            return answered
        if self.runner is None or self.runner.done():
            answered.set_exception(Unavailable("the Work stream is not open", method=METHOD))
            return answered
        sequence = self._next_sequence
        self._next_sequence += 1
        request = inbox_pb2.WorkRequest(sequence=sequence)
        getattr(request, WORK_FIELDS[rpc]).CopyFrom(message)
        fill_trace_context(request)  # the caller's span (a handler's), resends included
        # Sent again on the next stream after a break when a repeat cannot harm: rpcs' retry column.
        self._unanswered[sequence] = _Call(request, answered, resend=rpc.retry_safe)
        self._outbox.put_nowait(request)
        # A timer, not asyncio.wait_for: no task and no shield per call.
        deadline = loop.call_later(self.timeout if timeout is None else timeout, self._expire, sequence)

        def forget(_: asyncio.Future[Any]) -> None:
            # Answered, given up (its deadline) or cancelled: never sent again.
            deadline.cancel()
            self._unanswered.pop(sequence, None)

        answered.add_done_callback(forget)
        return answered

    def _expire(self, sequence: int) -> None:
        _settle(self._unanswered.pop(sequence, None), DeadlineExceeded("no answer on the Work stream", method=METHOD))

    # -- the stream's life --

    async def _run(self) -> None:
        """Keeps a stream open until close(); raises the error that refused it for good (Unimplemented ...)."""
        while True:
            self.opened += 1
            number = self.opened
            call = self._open_call(None, metadata=with_trace_metadata(self._metadata))  # None: written by _write
            outbox: asyncio.Queue[inbox_pb2.WorkRequest | None] = asyncio.Queue()
            self._outbox = outbox
            self.subscribed = None
            self._server_draining = False
            self._outstanding = self._wanted() if self._crediting else 0
            first = inbox_pb2.WorkRequest(subscribe=self._subscription, credit=self._outstanding)
            first.stop_pushing = not self._crediting  # reopened after the worker stopped: no pushes either
            outbox.put_nowait(first)
            for waiting in sorted(self._unanswered.values(), key=lambda c: c.request.sequence):
                outbox.put_nowait(waiting.request)
            if self._closing:  # close() came while the stream was down: this one half-closes too
                outbox.put_nowait(_CLOSE)
            writer = asyncio.create_task(self._write(call, outbox, number))
            try:
                async for response in call:
                    self._receive(response, number)
                if self._closing:
                    self._fail_all(Unavailable("the Work stream ended before this call was answered", method=METHOD))
                    return
                error: InboxError = Unavailable("the server ended the Work stream", method=METHOD)
            except grpc.aio.AioRpcError as exc:
                error = error_from_status(exc.code(), exc.details(), method=METHOD)
            finally:
                writer.cancel()
                call.cancel()
            if not isinstance(error, TRANSIENT_CLAIM_ERRORS):
                self._broken = error
                self._fail_all(error)
                self._on_broken(number)
                raise error
            self._broke(number, error)
            if self._closing:
                self._fail_all(Unavailable(f"the Work stream broke while closing: {error}", method=METHOD))
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._half_closed.wait(), self._pacer.failed(error, stream=True))
            if self._closing and not self._unanswered:
                return  # closed while down, owing nothing: no stream to open only to close it

    async def _write(self, call: Any, outbox: asyncio.Queue[inbox_pb2.WorkRequest | None], number: int) -> None:
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError, grpc.aio.UsageError):
            while True:
                item = await outbox.get()
                if item is _CLOSE:
                    await call.done_writing()
                    return
                if item.sequence:
                    waiting = self._unanswered.get(item.sequence)
                    if waiting is None:
                        continue  # given up (its deadline passed) before it went out
                    waiting.written_on = number  # in doubt from here on: it may reach the server
                await call.write(item)

    def _receive(self, response: inbox_pb2.WorkResponse, number: int) -> None:
        kind = response.WhichOneof("response")
        if kind == "events":
            events = list(response.events.events)
            self._outstanding = max(0, self._outstanding - len(events))
            self._on_events(number, events)
            self.top_up()
        elif kind == "result":
            self._answer(response.result)
        elif kind == "subscribed":
            self.subscribed = response.subscribed
            self._pacer.answered(1, long_polls=True)  # a stream that subscribes is well: the next break starts over
        elif kind == "draining":
            self._drained_by_server(number, response.draining.grace.ToTimedelta().total_seconds())

    def _drained_by_server(self, number: int, grace: float) -> None:
        """The server of stream `number` stops: no more credit on it, and the worker is told."""
        if self._server_draining:
            return
        self._server_draining = True
        if self._crediting and self._broken is None:
            self._outbox.put_nowait(inbox_pb2.WorkRequest(stop_pushing=True))
        if self._on_draining is not None:
            self._on_draining(number, grace)

    def _answer(self, result: inbox_pb2.WorkResult) -> None:
        waiting = self._unanswered.pop(result.sequence, None)
        if waiting is None or waiting.answered.done():
            return  # its caller gave up
        which = result.WhichOneof("result")
        if which == "error":
            error = error_from_code(result.error.code, result.error.message, method=METHOD)
            _settle(waiting, error or Unavailable("the call was answered OK without a result", method=METHOD))
        elif which is None:
            _settle(waiting, Unavailable("the call was answered without a result", method=METHOD))
        else:
            waiting.answered.set_result(getattr(result, which))

    def _broke(self, number: int, error: InboxError) -> None:
        """Stream `number` broke: its unanswered Fails and Releases fail; the rest wait for the next stream."""
        for sequence, waiting in list(self._unanswered.items()):
            if waiting.written_on == number and not waiting.resend:
                del self._unanswered[sequence]
                _settle(
                    waiting,
                    Unavailable(
                        f"the Work stream broke before this call's answer ({error}): its claim ended with the stream",
                        method=METHOD,
                    ),
                )
        self._on_broken(number)

    def _fail_all(self, error: InboxError) -> None:
        for waiting in self._unanswered.values():
            _settle(waiting, type(error)(error.details, method=error.method))
        self._unanswered.clear()


def _settle(waiting: _Call | None, error: InboxError) -> None:
    if waiting is not None and not waiting.answered.done():
        waiting.answered.set_exception(error)
