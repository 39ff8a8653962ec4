"""The Inbox's live Work streams: their registry, and their drain when the server stops.

`WorkStreams` is what the presence writer (background/presence.py) tells
PostgreSQL, so that Stats counts connected workers across processes, and
what the server waits for when it stops.

The drain (DESIGN, Streams: "A draining server says so"): on stop every
live stream is told (`draining`, with the grace left) and pushes no more;
its calls are still answered. A stream that ends before the grace is over
ends its claims as ever (a worker that vanished: attempt counted); one that
the server's stop cut off at the grace's end releases what it still holds,
the attempt not counted, since the worker lost nothing by its own doing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Collection

from inboxd.domain.vocabulary import ClaimRequest
from inboxd.usecases.stream_inbox import StreamInbox
from inboxd.usecases.streams import LiveStream, WorkSession

log = logging.getLogger(__name__)

# A stream that ends this close to its drain's grace end was cut off by the
# server's stop (grpc cancels at the grace), not by its worker.
DRAIN_CUT_SLACK = 0.1


class WorkStreams:
    """The Inbox's live Work streams, and the ends it still has to finish."""

    def __init__(self, inbox: StreamInbox) -> None:
        self._inbox = inbox
        self._live: dict[WorkSession, None] = {}
        self._closing: set[asyncio.Task[None]] = set()
        # Set once the server began to stop: its streams push no more.
        self.draining = False
        # The loop time the drain's grace ends at (None: not draining).
        self._grace_ends: float | None = None
        # Set while no stream is live: a stop waits for the streams grpc cut off to close.
        self._none_live = asyncio.Event()
        self._none_live.set()
        # What a stream's silence is measured by (a test moves it with its clock).
        self.monotonic: Callable[[], float] = time.monotonic

    def open(self, subscription: ClaimRequest, caller: str) -> WorkSession:
        """A new stream's session, live from now; its heartbeat begins with its first push."""
        session = WorkSession(self._inbox, subscription, caller, self._now)
        self._live[session] = None
        self._none_live.clear()
        self._inbox.observer.work_streams_open(1)
        return session

    def _now(self) -> float:
        # Read at each call, not bound once: a test replaces `monotonic` after streams opened.
        return self.monotonic()

    def close(self, session: WorkSession, after: Collection[asyncio.Future[None]] = ()) -> None:
        """The stream ended: no longer live; once the calls `after` are done, what it holds ends (in the background)."""
        if session not in self._live:
            return
        del self._live[session]
        if not self._live:
            self._none_live.set()
        session.stop_heartbeat()
        self._inbox.observer.work_credit(-session.credit)
        self._inbox.observer.work_streams_open(-1)
        task = asyncio.ensure_future(self._end(session, list(after)))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _end(self, session: WorkSession, after: list[asyncio.Future[None]]) -> None:
        try:
            cut_by_drain = self.grace_over()
            if after:
                # A call in flight may end a claim itself: its answer is lost, its commit is not.
                await asyncio.wait(after)
            if cut_by_drain:
                await session.release_held()
            else:
                await session.end()
        except Exception as exc:  # noqa: BLE001 - the leases then expire as they would without streams
            log.warning("could not end a Work stream's claims at once: %s", exc or type(exc).__name__)

    def drain(self, grace: float) -> None:
        """The server is stopping: every live stream is told, pushes no more, and ends once it holds nothing.

        What a stream still holds when the `grace` (seconds) ends is released, not ended as a crash.
        """
        if not self.draining:
            self._grace_ends = asyncio.get_running_loop().time() + grace
        self.draining = True
        for session in list(self._live):
            session.on_drain()

    def grace_left(self) -> float:
        """Seconds left of the drain's grace (0 when not draining, or over)."""
        if self._grace_ends is None:
            return 0.0
        return max(0.0, self._grace_ends - asyncio.get_running_loop().time())

    def grace_over(self) -> bool:
        """Whether the drain's grace has ended (a stream ending now was cut off by the server's stop)."""
        return self._grace_ends is not None and self.grace_left() <= DRAIN_CUT_SLACK

    def beating(self) -> int:
        """How many live streams run a heartbeat now: those holding events, or that did at their last beat."""
        return sum(1 for session in self._live if session.beating)

    def live(self) -> list[LiveStream]:
        """Every live stream of this process."""
        return [session.live() for session in self._live]

    def workers_by_namespace(self) -> dict[str, list[str]]:
        """The worker ids connected per subscribed namespace ("*" for a stream that names none)."""
        workers: dict[str, list[str]] = {}
        for stream in self.live():
            for namespace in stream.namespaces or ("*",):
                workers.setdefault(namespace, []).append(stream.worker_id)
        return workers

    async def renew_all(self) -> None:
        """One heartbeat of every live stream now (tests move the clock, then beat)."""
        await asyncio.gather(*(session.renew() for session in self._live))

    async def closed(self, live_within: float = 0.0) -> None:
        """Waits for every ended stream's claims to be ended (or released).

        `live_within`: first wait up to this long for the live streams to
        close: grpc's stop returns as it cancels them, before their handlers
        have run their ends.
        """
        if live_within > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._none_live.wait(), live_within)
        while self._closing:
            await asyncio.wait(set(self._closing))
