"""Running out of file descriptors, said once a minute instead of a traceback per failed accept.

asyncio's accept loop reports every failed accept to the loop's exception
handler with a traceback, and tries again a second later. A review held 300
half-sent requests against an edge and it wrote 232 MB of "Too many open
files" tracebacks in about 100 s. The edge raises its soft descriptor limit
to the hard one at start, caps its connections below it (edge_limits), and,
should descriptors still run short, says so here once per interval with the
count of errors since the last line. (The server has the same handler; the
edge does not import the server.)
"""

from __future__ import annotations

import asyncio
import errno
import logging
import resource
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("inboxd_edge")

OUT_OF_DESCRIPTORS_INTERVAL = 60.0
_OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE)

ExceptionHandler = Callable[[asyncio.AbstractEventLoop, dict[str, Any]], object]


def raise_descriptor_limit() -> tuple[int, int]:
    """Raises the soft RLIMIT_NOFILE to the hard one; returns (before, after)."""
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


class OutOfDescriptorsLog:
    """An event loop exception handler: "out of file descriptors" once per interval, the rest as before."""

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
            "since the last report. Raise the limit (ulimit -n, LimitNOFILE=) or lower [limits] max_connections",
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
