"""A stopping worker's last part: its stop signals, the grace for running handlers, the releases after it.

The Worker decides when it stops (`Worker.stop`, a signal, a cancelled
run); this is what stopping then does, given the worker's running jobs.
A draining server's grace (`release_within`) is the same idea seen from the
server's side: the worker goes on, on the stream it opens next.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Awaitable, Callable, Mapping

from inboxd_client.finishing import Job

# The worker's logger still: what it logs while stopping did not move with the code.
log = logging.getLogger("inboxd_client.worker")

# After grace: how long cancelled handlers get to record outcomes before their releases are given up.
RELEASE_TIMEOUT = 10.0
# A draining server's grace: how long before its end the worker releases what still runs, so that the
# Releases arrive before the server's own cut-off (which releases what is left itself).
SERVER_GRACE_MARGIN = 1.0


def release_within(grace: float) -> float:
    """Of a draining server's `grace` (seconds), how long running handlers get before their events are released."""
    return max(0.0, grace - min(SERVER_GRACE_MARGIN, grace / 4))


def install_stop_signals(loop: asyncio.AbstractEventLoop, on_signal: Callable[[], None]) -> list[int]:
    """Has SIGTERM and SIGINT call `on_signal` (in the main thread only); the signals installed."""
    if threading.current_thread() is not threading.main_thread():
        return []
    installed: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, on_signal)
        except (NotImplementedError, RuntimeError, ValueError):
            continue  # not on this platform
        installed.append(sig)
    return installed


async def drain(
    jobs: Mapping[asyncio.Task[None], Job],
    side_tasks: set[asyncio.Task[None]],
    *,
    remaining: float,
    hurry: asyncio.Event,
    releasing: Callable[[Mapping[asyncio.Task[None], Job]], Awaitable[None]] | None = None,
) -> None:
    """Lets running handlers finish for `remaining` seconds (or until `hurry`), then releases the rest.

    `releasing(late)` is awaited once the late jobs are told to release (a
    Work stream half-closes behind their Releases), before their answers.
    """
    running = set(jobs)
    if running and remaining > 0 and not hurry.is_set():
        await _wait_any(running, hurry, remaining)
    late = [task for task in running if not task.done()]
    for task in late:
        jobs[task].interrupt(releasing=True)
    if late:
        log.info("grace period over: releasing %d events", len(late))
        if releasing is not None:
            await releasing({task: jobs[task] for task in late})
        await asyncio.wait(late, timeout=RELEASE_TIMEOUT)
    if side_tasks:
        await asyncio.wait(set(side_tasks), timeout=RELEASE_TIMEOUT)


async def _wait_any(tasks: set[asyncio.Task[None]], event: asyncio.Event, seconds: float | None) -> None:
    """Waits until all `tasks` are done, `event` is set, or `seconds` pass."""
    watcher = asyncio.ensure_future(event.wait())
    try:
        everything = asyncio.ensure_future(asyncio.wait(tasks))
        await asyncio.wait({everything, watcher}, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        everything.cancel()
    finally:
        watcher.cancel()
