"""Bounds on connections: how many, how long idle or open, and what running out of descriptors looks like.

A review held 290 idle HTTP/2 connections, without a token, against a server
under a 300-descriptor limit: new callers, the console and /metrics failed,
the pool could not reach the database, and the accept loops logged tracebacks
by the megabyte. Now grpc closes idle and old connections, and half-open ones
that never finish their handshake; it refuses connections beyond a cap that
leaves descriptors for everything else; the soft descriptor limit is raised to
the hard one at start; and running out is said once per interval.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import resource
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from inboxd.config.settings import Settings

log = logging.getLogger(__name__)

# Descriptors kept for what is not a gRPC connection, beyond the pool's
# connections: the wake-up listener, console and /metrics connections, the
# listening sockets, grpc's own pipes and event fds, log and data files.
RESERVED_DESCRIPTORS = 128
# However low the descriptor limit, a server takes this many connections.
MIN_CONNECTIONS = 8
OUT_OF_DESCRIPTORS_INTERVAL = 60.0
_OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE)

ExceptionHandler = Callable[[asyncio.AbstractEventLoop, dict[str, Any]], object]


def raise_descriptor_limit() -> tuple[int, int]:
    """Raises the soft RLIMIT_NOFILE to the hard one; returns (before, after).

    The soft limit is often 1024 while the hard one is far higher: a server
    that holds connections should have what it is allowed.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as exc:
            log.warning("could not raise the descriptor limit from %d to %d: %s", soft, hard, exc)
            return soft, soft
        return soft, hard
    return soft, soft


def descriptor_limit() -> int | None:
    """The soft RLIMIT_NOFILE, or None when unlimited."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else soft


def connection_cap(settings: Settings, limit: int | None) -> int:
    """INBOXD_MAX_CONNECTIONS, lowered to what `limit` descriptors leave beside the pool and the reserve."""
    if limit is None:
        return settings.max_connections
    room = max(MIN_CONNECTIONS, limit - settings.pool_size - RESERVED_DESCRIPTORS)
    return min(settings.max_connections, room)


def connection_options(settings: Settings) -> list[tuple[str, int]]:
    """grpc server options for the connection bounds in `settings`."""
    limit = descriptor_limit()
    cap = connection_cap(settings, limit)
    if cap < settings.max_connections:
        log.warning(
            "at most %d gRPC connections, not INBOXD_MAX_CONNECTIONS=%d: the descriptor limit is %s "
            "(%d kept for the pool and the rest); raise it (ulimit -n, LimitNOFILE=)",
            cap,
            settings.max_connections,
            limit,
            settings.pool_size + RESERVED_DESCRIPTORS,
        )

    if settings.max_streams_per_connection <= settings.max_waiting_claims_per_caller:
        log.warning(
            "INBOXD_MAX_STREAMS_PER_CONNECTION=%d is not above INBOXD_MAX_WAITING_CLAIMS_PER_CALLER=%d: a worker "
            "whose long-polls fill its connection has its Completes and RenewLeases wait behind them",
            settings.max_streams_per_connection,
            settings.max_waiting_claims_per_caller,
        )
    return [
        ("grpc.max_allowed_incoming_connections", cap),
        ("grpc.max_concurrent_streams", settings.max_streams_per_connection),
        ("grpc.max_connection_idle_ms", _ms(settings.connection_idle)),
        ("grpc.max_connection_age_ms", _ms(settings.connection_age)),
        ("grpc.max_connection_age_grace_ms", _ms(settings.connection_age_grace)),
        ("grpc.server_handshake_timeout_ms", _ms(settings.handshake_timeout)),
    ]


def _ms(value: timedelta) -> int:
    return round(value.total_seconds() * 1000)


class OutOfDescriptorsLog:
    """An event loop exception handler: "out of file descriptors" once per interval, the rest as before.

    asyncio's accept loop (the console's and /metrics' listeners) reports every
    failed accept to the loop's exception handler with a traceback, and tries
    again a second later, for as long as descriptors run short.
    """

    def __init__(
        self,
        previous: ExceptionHandler | None,
        interval: float = OUT_OF_DESCRIPTORS_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.previous = previous
        self.interval = interval
        self.clock = clock
        self._next_report = float("-inf")
        self._unreported = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if not (isinstance(exc, OSError) and exc.errno in _OUT_OF_DESCRIPTORS):
            if self.previous is not None:
                self.previous(loop, context)
            else:
                loop.default_exception_handler(context)
            return
        now = self.clock()
        if now < self._next_report:
            self._unreported += 1
            return
        log.error(
            "out of file descriptors (%s, limit %s): new connections wait or fail; %d more such errors "
            "since the last report. Raise the limit (ulimit -n, LimitNOFILE=) or lower INBOXD_MAX_CONNECTIONS",
            context.get("message", exc),
            descriptor_limit(),
            self._unreported,
        )
        self._unreported = 0
        self._next_report = now + self.interval


def install_out_of_descriptors_log(loop: asyncio.AbstractEventLoop) -> None:
    """Puts OutOfDescriptorsLog in front of `loop`'s exception handler, once."""
    current = loop.get_exception_handler()
    if not isinstance(current, OutOfDescriptorsLog):
        loop.set_exception_handler(OutOfDescriptorsLog(current))
