"""AcceptStream for the async client: many concurrent Accepts over one open gRPC stream.

A message on an open stream costs the server about a quarter of a unary
call (docs/benchmarks.md), so an edge that accepts all day keeps one stream
open and multiplexes its callers over it by sequence:

    async with client.accept_stream() as stream:
        answer = await stream.accept(namespace=..., event_key=..., event_type=..., payload=...)

Each `accept` answers after its item's commit, or raises the exception the
unary `accept` would raise for that item's status code. When the stream
breaks (UNAVAILABLE: a reset connection, a server restarting), it is
reopened and every unanswered item is sent again: Accept is idempotent, so an
item that had committed answers DUPLICATE. Nothing answered is lost, and
every caller gets an answer or an error (at the latest after `timeout`).
"""

# `timeout` is each item's deadline, as the unary calls name it, not an asyncio timeout.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from datetime import datetime
from types import TracebackType
from typing import Any

import grpc

from inboxd_client import builders
from inboxd_client.backoff import Backoff
from inboxd_client.connection import Metadata
from inboxd_client.errors import DeadlineExceeded, InboxError, Unavailable, error_from_code, error_from_status
from inboxd_client.trace_propagation import fill_trace_context
from inboxd_client.v1 import inbox_pb2

PATH = "/inboxd.v1.InboxService/AcceptStream"
METHOD = "AcceptStream"
# Codes that break the stream, not the items: reopened, the unanswered resent.
REOPEN_ON = frozenset({grpc.StatusCode.UNAVAILABLE})
_CLOSE = None  # the writer's cue to half-close


class AcceptStream:
    """One AcceptStream, opened by `async with` (or `open()`), shared by any number of concurrent `accept`s.

    `timeout` is each item's default deadline in seconds, resends included.
    A stream refused for good (UNAUTHENTICATED, PERMISSION_DENIED for the
    accept scope, UNIMPLEMENTED on a server without it) fails its items and
    every later `accept` with that error.
    """

    def __init__(
        self,
        channel: grpc.aio.Channel,
        metadata: Metadata,
        *,
        timeout: float,
        reopen_backoff: Backoff | None = None,
    ) -> None:
        self._open_call = channel.stream_stream(
            PATH,
            request_serializer=inbox_pb2.AcceptStreamRequest.SerializeToString,
            response_deserializer=inbox_pb2.AcceptStreamResponse.FromString,
        )
        self._metadata = metadata
        self.timeout = timeout
        self._backoff = reopen_backoff or Backoff(0.05, 2.0)
        self._next_sequence = 0
        self._unanswered: dict[int, tuple[inbox_pb2.AcceptStreamRequest, asyncio.Future[inbox_pb2.AcceptResponse]]] = {}
        self._outbox: asyncio.Queue[inbox_pb2.AcceptStreamRequest | None] = asyncio.Queue()
        self._closing = False
        self._broken: InboxError | None = None
        self._runner: asyncio.Task[None] | None = None
        # How many times the stream was (re)opened: 1 while it never broke.
        self.opened = 0

    @property
    def broken(self) -> InboxError | None:
        """The error that ended this stream for good (it is never reopened), or None while it lives.

        An `accept` that raised this very exception failed with its stream,
        not for anything of its own: a pool may open a fresh stream for it.
        """
        return self._broken

    def open(self) -> AcceptStream:
        if self._runner is None:
            self._runner = asyncio.create_task(self._run())
        return self

    async def close(self) -> None:
        """Half-closes the stream once every item sent is answered (or has failed), and waits for its end."""
        if self._runner is None:
            return
        self._closing = True
        self._outbox.put_nowait(_CLOSE)
        with contextlib.suppress(asyncio.CancelledError):
            await self._runner

    async def __aenter__(self) -> AcceptStream:
        return self.open()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def accept(
        self,
        namespace: str,
        event_key: str,
        event_type: str,
        payload: object,
        *,
        metadata: Mapping[str, str] | None = None,
        message_id: str = "",
        ordering_key: str = "",
        revision: int = 0,
        available_at: datetime | None = None,
        content_type: str = "",
        timeout: float | None = None,
    ) -> inbox_pb2.AcceptResponse:
        """Accepts one event over the stream: answered after its commit, as the unary `accept` answers."""
        request = builders.accept_request(
            namespace,
            event_key,
            event_type,
            payload,
            metadata=metadata,
            message_id=message_id,
            ordering_key=ordering_key,
            revision=revision,
            available_at=available_at,
            content_type=content_type,
        )
        return await self.accept_request(request, timeout=timeout)

    async def accept_request(
        self, request: inbox_pb2.AcceptRequest, *, timeout: float | None = None
    ) -> inbox_pb2.AcceptResponse:
        """`accept` for a prebuilt `AcceptRequest` (see `builders.accept_request`)."""
        if self._broken is not None:
            raise self._broken
        if self._runner is None or self._closing:
            raise RuntimeError("the AcceptStream is not open: use `async with client.accept_stream() as stream`")
        sequence = self._next_sequence
        self._next_sequence += 1
        item = inbox_pb2.AcceptStreamRequest(sequence=sequence, accept=request)
        # This delivery's caller's span, on the item: the stream's metadata is its opener's, once, for
        # every item, and is deliberately not traced (an item without a context would join the opener's trace).
        fill_trace_context(item.accept)
        loop = asyncio.get_running_loop()
        answered: asyncio.Future[inbox_pb2.AcceptResponse] = loop.create_future()
        self._unanswered[sequence] = (item, answered)
        self._outbox.put_nowait(item)
        # A timer, not asyncio.wait_for: no task and no shield per item (the generator's CPU is the bench's too).
        deadline = loop.call_later(self.timeout if timeout is None else timeout, self._expire, sequence)
        try:
            return await answered
        finally:
            deadline.cancel()
            # Given up (cancelled, timed out) or answered: never sent again.
            self._unanswered.pop(sequence, None)

    def _expire(self, sequence: int) -> None:
        entry = self._unanswered.pop(sequence, None)
        if entry is not None and not entry[1].done():
            entry[1].set_exception(
                DeadlineExceeded("no answer within the deadline: the event may or may not be stored", method=METHOD)
            )

    async def _run(self) -> None:
        """Keeps the stream open: reads answers, reopens on a break and resends what is unanswered."""
        while True:
            call = self._open_call(None, metadata=self._metadata)  # None: written by _write
            self.opened += 1
            # A fresh outbox for this call: what is unanswered first, in order, then what comes.
            self._outbox = asyncio.Queue()
            for item, _ in sorted(self._unanswered.values(), key=lambda entry: entry[0].sequence):
                self._outbox.put_nowait(item)
            if self._closing:
                self._outbox.put_nowait(_CLOSE)
            writer = asyncio.create_task(self._write(call, self._outbox))
            try:
                async for response in call:
                    self._backoff.reset()
                    self._answer(response)
                if self._closing:
                    self._fail_all(Unavailable("the stream ended before this item was answered", method=METHOD))
                    return
            except grpc.aio.AioRpcError as exc:
                if exc.code() not in REOPEN_ON:
                    self._broken = error_from_status(exc.code(), exc.details(), method=METHOD)
                    self._fail_all(self._broken)
                    return
                if self._closing and not self._unanswered:
                    # Closing with nothing left to answer: a server that is gone would be retried for ever.
                    return
            finally:
                writer.cancel()
                call.cancel()
            await asyncio.sleep(self._backoff.next())

    async def _write(self, call: Any, outbox: asyncio.Queue[inbox_pb2.AcceptStreamRequest | None]) -> None:
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
            while True:
                item = await outbox.get()
                if item is _CLOSE:
                    await call.done_writing()
                    return
                if item.sequence in self._unanswered:  # not given up meanwhile
                    await call.write(item)

    def _answer(self, response: inbox_pb2.AcceptStreamResponse) -> None:
        entry = self._unanswered.pop(response.sequence, None)
        if entry is None:
            return  # its caller gave up
        _, answered = entry
        if answered.done():
            return
        if response.WhichOneof("result") == "accepted":
            answered.set_result(response.accepted)
        else:
            error = error_from_code(response.error.code, response.error.message, method=METHOD)
            answered.set_exception(error or Unavailable("the item was answered without a result", method=METHOD))

    def _fail_all(self, error: InboxError) -> None:
        for _, answered in self._unanswered.values():
            if not answered.done():
                answered.set_exception(error)
        self._unanswered.clear()
