"""A small pool of AcceptStreams, each on a connection of its own, that the edge's deliveries take turns on.

A message on an open stream costs inboxd about a quarter of a unary call
(docs/benchmarks.md). One connection per stream, not one for all: inboxd's
`--workers` processes share the port by connection (the kernel hands each
connection to one process), so one connection would put every delivery on one
process.

The client's `AcceptStream` resends an item whose stream broke (Accept is
idempotent: a resend of what had committed answers DUPLICATE), so a stream
cut by a GOAWAY or a restarting process still answers its items. What it
cannot know is that inboxd is gone: a unary Accept then fails UNAVAILABLE at
once, and so does an item here when its connection cannot be made
(TRANSIENT_FAILURE), rather than hold the provider until the deadline.
"""

# `timeout` is each item's deadline, as the client names it, not an asyncio timeout.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable, Sequence

import grpc
import grpc.aio

from inboxd_client.accept_stream import AcceptStream
from inboxd_client.connection import Metadata
from inboxd_client.errors import InboxError, Unavailable
from inboxd_client.v1 import inbox_pb2

METHOD = "AcceptStream"


class StreamEnded(Exception):
    """An item failed with its stream, which ended for good (`error`), not for anything of its own."""

    def __init__(self, error: InboxError) -> None:
        super().__init__(str(error))
        self.error = error


class _Slot:
    """One connection, its stream (replaced when it ends for good), and whether inboxd can be reached on it."""

    def __init__(
        self, channel: grpc.aio.Channel, open_stream: Callable[[grpc.aio.Channel], AcceptStream], grace: float
    ) -> None:
        self.channel = channel
        self._grace = grace
        self._open_stream = open_stream
        self.stream = open_stream(channel).open()
        self.unreachable: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._watcher = asyncio.create_task(self._watch())

    @property
    def reachable(self) -> bool:
        return not self.unreachable.done()

    def renew(self, ended: AcceptStream) -> None:
        """A fresh stream in place of `ended`, unless another item renewed it already."""
        if self.stream is ended:
            self.stream = self._open_stream(self.channel).open()

    async def _watch(self) -> None:
        """Follows the connection's state: `unreachable` is done while it is TRANSIENT_FAILURE."""
        state = self.channel.get_state(try_to_connect=False)
        while True:
            failing = state is grpc.ChannelConnectivity.TRANSIENT_FAILURE
            if failing and self.reachable:
                self.unreachable.set_result(None)
            elif not failing and not self.reachable:
                self.unreachable = asyncio.get_running_loop().create_future()
            await self.channel.wait_for_state_change(state)
            state = self.channel.get_state(try_to_connect=False)

    async def close(self) -> None:
        self._watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._watcher
        # The close waits for the stream's clean end (its half-close answered), which a server that never
        # answers never gives: bounded by one deadline, then cut (cancelling the close cuts the stream).
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stream.close(), self._grace)
        await self.channel.close(None)


class StreamPool:
    """AcceptStreams on `channels` (one each), used in turn; `close` half-closes them and closes the channels."""

    def __init__(self, channels: Sequence[grpc.aio.Channel], metadata: Metadata, *, timeout: float) -> None:
        if not channels:
            raise ValueError("a StreamPool needs at least one channel")

        def open_stream(channel: grpc.aio.Channel) -> AcceptStream:
            return AcceptStream(channel, metadata, timeout=timeout)

        self._slots = [_Slot(channel, open_stream, timeout) for channel in channels]
        self._turns = itertools.cycle(self._slots)
        self._closed = False

    def __len__(self) -> int:
        return len(self._slots)

    @property
    def streams(self) -> tuple[AcceptStream, ...]:
        """The streams the next deliveries go on, one per connection."""
        return tuple(slot.stream for slot in self._slots)

    async def accept(self, request: inbox_pb2.AcceptRequest, *, timeout: float) -> inbox_pb2.AcceptResponse:
        """Accepts over the next stream whose connection is not failing: answered after the item's commit.

        Raises the client's InboxError for the item's status, Unavailable when
        inboxd cannot be reached, or StreamEnded when the stream itself was
        refused or ended for good (the slot then gets a fresh stream).
        """
        if self._closed:
            raise Unavailable("the edge is stopping", method=METHOD)
        slot = self._next_slot()
        if not slot.reachable:
            # A unary Accept fails at once on a channel in TRANSIENT_FAILURE: so does the item, unsent.
            raise Unavailable("inboxd cannot be reached", method=METHOD)
        if slot.stream.broken is not None:
            # Ended for good while idle (a proxy's stream timeout, say): this item was never on it.
            slot.renew(slot.stream)
        stream = slot.stream
        item = asyncio.ensure_future(stream.accept_request(request, timeout=timeout))
        try:
            await asyncio.wait((item, slot.unreachable), return_when=asyncio.FIRST_COMPLETED)
            if not item.done():
                # The stream broke and no connection can be made: what a unary call would have failed on.
                raise Unavailable("the connection to inboxd was lost and cannot be made again", method=METHOD)
            return item.result()
        except InboxError as exc:
            if exc is stream.broken:
                slot.renew(stream)
                raise StreamEnded(exc) from exc
            raise
        finally:
            # Given up (unreachable, or this request cancelled): never resent by the stream.
            item.cancel()

    def _next_slot(self) -> _Slot:
        """The next slot in turn, skipping those whose connection is failing while another's is not."""
        for _ in self._slots:
            slot = next(self._turns)
            if slot.reachable:
                return slot
        return next(self._turns)

    async def close(self) -> None:
        """Half-closes every stream once its items are answered, then closes the channels."""
        self._closed = True
        await asyncio.gather(*(slot.close() for slot in self._slots))
