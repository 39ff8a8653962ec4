"""Bounds on the edge's connections: a deadline for each request's headers, and a cap on how many are open.

A review held 300 half-sent requests against an edge: aiohttp waits for
headers for ever, so they held 300 descriptors, the process ran out, and
correctly signed deliveries timed out for as long as they were held. Now:

- a connection must finish a request's headers within `header_timeout_seconds`
  of opening, or of its previous answer (so an idle keep-alive connection is
  bounded too); trickling bytes does not extend it;
- a request's body must be in within `body_timeout_seconds` (app.py: 408);
- at most `max_connections` are open, lowered to what the descriptor limit
  leaves. A new connection at the cap closes the oldest one still waiting
  for its headers, so a sender that holds every slot half-sent cannot keep a
  provider out; only when every slot carries a request is the new one closed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from inboxd_edge.edge_descriptors import descriptor_limit
from inboxd_edge.ops_settings import LimitsSettings

log = logging.getLogger("inboxd_edge")

# Descriptors kept for what is not a provider's connection: the channels to inboxd (one per AcceptStream),
# the listening sockets, /metrics, log files, the event loop's own.
RESERVED_DESCRIPTORS = 64
# However low the descriptor limit, the edge takes this many connections.
MIN_CONNECTIONS = 8
# Connections closed early are logged at most this often (seconds), with counts.
CLOSED_REPORT_INTERVAL = 60.0

# Called with why a connection was closed early: "header_timeout", "evicted" or "over_cap" (for the metrics).
ClosedHook = Callable[[str], None]
RequestFunction = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]


def connection_cap(configured: int, limit: int | None) -> int:
    """`configured`, lowered to what `limit` descriptors leave beside the reserve."""
    if limit is None:
        return configured
    return min(configured, max(MIN_CONNECTIONS, limit - RESERVED_DESCRIPTORS))


class _Connection:
    """One open connection: whether a request is in its handler, and its header deadline while none is."""

    __slots__ = ("deadline", "in_request", "transport", "waiting_since")

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.in_request = 0
        self.deadline: asyncio.TimerHandle | None = None
        self.waiting_since = 0.0


class ConnectionGuard:
    """Tracks the edge's connections (by aiohttp's RequestHandler) and enforces the header deadline and the cap."""

    def __init__(
        self, limits: LimitsSettings, on_closed: ClosedHook | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.header_timeout = limits.header_timeout_seconds
        self.cap = connection_cap(limits.max_connections, descriptor_limit())
        if self.cap < limits.max_connections:
            log.warning(
                "at most %d connections, not [limits] max_connections=%d: the descriptor limit is %s "
                "(%d kept for the rest); raise it (ulimit -n, LimitNOFILE=)",
                self.cap, limits.max_connections, descriptor_limit(), RESERVED_DESCRIPTORS,
            )  # fmt: skip
        self._on_closed = on_closed
        self._clock = clock
        self._unreported: Counter[str] = Counter()
        self._next_report = float("-inf")
        # Insertion order is opening order; a connection moves to the end each time it starts waiting again.
        self._open: dict[RequestHandler, _Connection] = {}

    @property
    def open_connections(self) -> int:
        return len(self._open)

    def opened(self, handler: RequestHandler, transport: asyncio.Transport) -> None:
        if len(self._open) >= self.cap and not self._evict_one():
            self._closed_early("over_cap")
            transport.abort()
            return
        connection = _Connection(transport)
        self._open[handler] = connection
        self._wait_for_headers(handler, connection)

    def lost(self, handler: RequestHandler) -> None:
        connection = self._open.pop(handler, None)
        if connection is not None and connection.deadline is not None:
            connection.deadline.cancel()

    def request_started(self, handler: RequestHandler) -> None:
        """The request's headers are in: no header deadline while its handler runs (the body has its own)."""
        connection = self._open.get(handler)
        if connection is not None:
            connection.in_request += 1
            if connection.deadline is not None:
                connection.deadline.cancel()
                connection.deadline = None

    def request_ended(self, handler: RequestHandler) -> None:
        """Answered: the next request's headers are due within the header timeout from now."""
        connection = self._open.get(handler)
        if connection is not None:
            connection.in_request -= 1
            if connection.in_request == 0:
                # To the end of the order: the longest-waiting connection is the first one evicted.
                self._open[handler] = self._open.pop(handler)
                self._wait_for_headers(handler, connection)

    def _wait_for_headers(self, handler: RequestHandler, connection: _Connection) -> None:
        loop = asyncio.get_running_loop()
        connection.waiting_since = loop.time()
        connection.deadline = loop.call_later(self.header_timeout, self._header_deadline, handler)

    def _header_deadline(self, handler: RequestHandler) -> None:
        connection = self._open.get(handler)
        if connection is not None and connection.in_request == 0:
            self._closed_early("header_timeout")
            self.lost(handler)
            connection.transport.abort()

    def _evict_one(self) -> bool:
        """Closes the connection that has waited longest for headers; False when every one carries a request."""
        for handler, connection in self._open.items():
            if connection.in_request == 0:
                self._closed_early("evicted")
                self.lost(handler)
                connection.transport.abort()
                return True
        return False

    def _closed_early(self, reason: str) -> None:
        if self._on_closed is not None:
            self._on_closed(reason)
        # Said at most once per interval, with the counts since the last line: a flood of half-sent requests is
        # visible in the log without writing a line per connection.
        self._unreported[reason] += 1
        now = self._clock()
        if now >= self._next_report:
            log.warning(
                "closed connections that did not send their request in time or held a slot others needed "
                "since the last report: %s (open now %d, cap %d, header timeout %g s)",
                ", ".join(f"{name} {count}" for name, count in sorted(self._unreported.items())),
                len(self._open), self.cap, self.header_timeout,
            )  # fmt: skip
            self._unreported.clear()
            self._next_report = now + CLOSED_REPORT_INTERVAL


class GuardedServer(web.Server):
    """aiohttp's low-level server, telling `guard` of each connection as it opens and closes, and of each request."""

    def __init__(self, handler: RequestFunction, *, guard: ConnectionGuard, **kwargs: Any) -> None:
        async def guarded(request: web.BaseRequest) -> web.StreamResponse:
            guard.request_started(request.protocol)
            try:
                return await handler(request)
            finally:
                guard.request_ended(request.protocol)

        super().__init__(guarded, **kwargs)
        self.guard = guard

    def connection_made(self, handler: RequestHandler, transport: asyncio.Transport) -> None:
        super().connection_made(handler, transport)
        self.guard.opened(handler, transport)

    def connection_lost(self, handler: RequestHandler, exc: BaseException | None = None) -> None:
        self.guard.lost(handler)
        super().connection_lost(handler, exc)
