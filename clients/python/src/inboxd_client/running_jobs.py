"""A worker's claimed events in flight: each one run as a job, whichever way it came, until its slot frees.

An event comes from a unary Claim or is pushed on the Work stream; from
then on it is the same: its handler runs (`handler_runs`), its claim ends
(`finishing`), and its concurrency slot stays taken until both are done.
An event that arrives while the worker stops is handed straight back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from inboxd_client.finishing import Finisher, Job, WorkerStats
from inboxd_client.handler_runs import HandlerRuns
from inboxd_client.v1 import inbox_pb2

log = logging.getLogger("inboxd_client.worker")


class RunningJobs:
    """The jobs (one per claimed event) and the releases a worker has in flight, at most `concurrency` jobs."""

    def __init__(self, runs: HandlerRuns, finisher: Finisher, stats: WorkerStats, concurrency: int) -> None:
        self._runs = runs
        self._finisher = finisher
        self._stats = stats
        self.concurrency = concurrency
        self.tasks: dict[asyncio.Task[None], Job] = {}
        self.side_tasks: set[asyncio.Task[None]] = set()
        self.slot_freed = asyncio.Event()
        # Told as each slot frees: the Work stream gives its credit back.
        self.on_slot_freed: Callable[[], None] | None = None

    def __len__(self) -> int:
        return len(self.tasks)

    def free(self) -> int:
        """How many more events the worker may run now."""
        return self.concurrency - len(self.tasks)

    def start(self, event: inbox_pb2.ClaimedEvent, *, stream: int = 0) -> None:
        """Runs the event's handler and ends its claim; `stream` is the Work stream that pushed it (0: a Claim)."""
        job = self._runs.job(event)
        job.stream = stream
        task = asyncio.create_task(self._runs.run(job), name=f"inboxd {event.namespace}/{event.event_key}")
        self.tasks[task] = job
        task.add_done_callback(self._done)
        self._stats.claimed += 1

    def release(self, event: inbox_pb2.ClaimedEvent, sent: Awaitable[object] | None = None) -> None:
        """Hands an event straight back, its attempt uncounted: it came as the worker stopped.

        `sent`: its Release already went out (with a Work stream's half-close).
        """
        task = asyncio.create_task(self._finisher.release(event, sent))
        self.side_tasks.add(task)
        task.add_done_callback(self.side_tasks.discard)

    def lose(self, stream: int) -> None:
        """Work stream `stream` broke and its claims ended with it: their handlers are told, as for a lost lease."""
        lost = [job for task, job in self.tasks.items() if job.stream == stream and not task.done()]
        for job in lost:
            job.interrupt(releasing=False)
        if lost:
            log.warning(
                "the Work stream broke: the claims of %d running events ended with it, cancelling their handlers",
                len(lost),
            )

    def give_back(self, stream: int) -> int:
        """Work stream `stream`'s server drains and its grace is ending: its running events are released."""
        late = [job for task, job in self.tasks.items() if job.stream == stream and not task.done()]
        for job in late:
            job.interrupt(releasing=True)
        if late:
            log.info("the server's drain is ending: releasing %d running events, their attempts not counted", len(late))
        return len(late)

    def _done(self, task: asyncio.Task[None]) -> None:
        self.tasks.pop(task, None)
        self.slot_freed.set()
        if self.on_slot_freed is not None:
            self.on_slot_freed()
        if not task.cancelled() and task.exception() is not None:
            log.error("event task crashed", exc_info=task.exception())
