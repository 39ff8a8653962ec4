"""The bulk runner: carries every RUNNING bulk operation on, chunk by chunk, until it ends.

Every inboxd instance runs one (with the other instance duties). Each
operation is carried by one replica at a time: its carrier holds a
session-level advisory lock named after the operation for as long as it runs
it; the others find the lock taken and leave it. The lock is per operation,
so two operations may run on two replicas at once. The locks of every
operation a replica carries share one session (store/advisory.SharedLocks),
and the chunks run on the pool: a replica costs PostgreSQL one connection
beyond its pool however many operations it carries. A replica that dies
(SIGKILL, a lost host) loses its session and so its locks; the next
replica's poll finds the operations still RUNNING and carries them on from
their committed cursors.

Each chunk is one transaction (store/bulk_operations.py), so the pace is
kept here, between chunks: with a rate, a chunk holds at most a quarter
second's worth of events, and the next chunk begins no sooner than
`changed / rate` seconds after the one before it began. A chunk that came
late (a slow commit, a busy database) is not made up for by a burst: the
rate is a ceiling over every stretch of the run, not an average. A pace
sleep ends early when the operation is cancelled (background/bulk_pacing.py),
so a cancelled operation lets its lock go within a second. A database outage
only delays an operation (the chunk rolled back whole; it is tried again,
backing off); any other failure of a chunk will not be mended by retrying,
and the operation ends FAILED with the error.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable

from inboxd.background.bulk_pacing import PaceSleeps
from inboxd.domain.bulk_operations import BulkOperation, pace_wait
from inboxd.domain.errors import DatabaseFault, Unavailable
from inboxd.observability.metrics import InstanceMetrics
from inboxd.store.advisory import SharedLocks
from inboxd.usecases.admin import Operators

log = logging.getLogger(__name__)

RETRY_FIRST_SECONDS = 0.5
RETRY_MOST_SECONDS = 30.0
# How many matches a chunk deals with at most, whatever the rate.
LARGEST_CHUNK = 500

Sleep = Callable[[float], Awaitable[None]]


def operation_lock(op: uuid.UUID) -> int:
    """The advisory lock that names one operation: 64 bits of its id (a signed bigint)."""
    return int.from_bytes(op.bytes[:8], "big", signed=True)


class BulkRunner:
    """Finds RUNNING operations (on its poll, or at once when one starts in this process) and carries each on."""

    def __init__(
        self,
        operators: Operators,
        metrics: InstanceMetrics | None = None,
        *,
        poll_seconds: float | None = None,
        largest_chunk: int = LARGEST_CHUNK,
        sleep: Sleep = asyncio.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.operators = operators
        self.metrics = metrics
        poll = operators.inbox.settings.bulk_poll.total_seconds() if poll_seconds is None else poll_seconds
        self.poll_seconds = poll
        self.largest_chunk = largest_chunk
        self._sleep = sleep
        self._monotonic = monotonic
        self._carried: dict[uuid.UUID, asyncio.Task[None]] = {}
        self._started = asyncio.Event()
        self.pace = PaceSleeps(operators.ended_bulk_operations, sleep)
        self.locks = SharedLocks(operators.inbox.db.conninfo, "bulk operations")

    async def run_forever(self) -> None:
        """Polls for operations to carry until cancelled; the carriers are cancelled with it."""
        if self.poll_seconds <= 0:
            log.info("bulk runner off (INBOXD_BULK_POLL=0): other replicas carry bulk operations")
            return
        self.operators.bulk_started = self._started
        self.operators.bulk_cancelled = self.pace.cancelled
        try:
            while True:
                self._started.clear()
                await self.look_once()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._started.wait(), self.poll_seconds)
        finally:
            if self.operators.bulk_started is self._started:
                self.operators.bulk_started = None
                self.operators.bulk_cancelled = None
            await self.stop()

    async def look_once(self) -> None:
        """Starts a carrier for every RUNNING operation this runner does not carry yet."""
        try:
            running = await self.operators.running_bulk_operations()
        except Unavailable as exc:
            log.warning("bulk operations not looked for: %s", exc)
            return
        except DatabaseFault as exc:
            # A schema not migrated yet, say: the next look tries again; the runner never dies of it.
            log.error("bulk operations not looked for: %s", exc)
            return
        for op in running:
            if op not in self._carried:
                self.carry_soon(op)

    def carry_soon(self, op: uuid.UUID) -> asyncio.Task[None]:
        """Carries one operation on in the background (if another replica carries it, the task just ends)."""
        task = asyncio.create_task(self.carry(op), name=f"bulk operation {op}")
        self._carried[op] = task
        task.add_done_callback(functools.partial(self._carried_off, op))
        return task

    def _carried_off(self, op: uuid.UUID, task: asyncio.Task[None]) -> None:
        if self._carried.get(op) is task:
            del self._carried[op]
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("bulk operation %s: its carrier stopped: %s", op, exc, exc_info=exc)

    async def wait_idle(self) -> None:
        """Until every carrier of this runner has stopped (tests)."""
        while self._carried:
            await asyncio.gather(*self._carried.values(), return_exceptions=True)

    async def stop(self) -> None:
        tasks = list(self._carried.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.pace.stop()
        await self.locks.close()

    async def carry(self, op: uuid.UUID) -> None:
        """Runs the operation under its lock until it ends; outages back off and try again."""
        retry = RETRY_FIRST_SECONDS
        lock = operation_lock(op)
        while True:
            try:
                if not await self.locks.take(lock):
                    return  # another replica carries it
                try:
                    if self.metrics is not None:
                        self.metrics.bulk_running.inc()
                    try:
                        await self._chunks(op, lock)
                    finally:
                        if self.metrics is not None:
                            self.metrics.bulk_running.dec()
                    return
                finally:
                    await self.locks.give_back(lock)
            except Unavailable as exc:
                log.warning("bulk operation %s waits for the database (again in %.1f s): %s", op, retry, exc)
                await self._sleep(retry)
                retry = min(retry * 2, RETRY_MOST_SECONDS)

    async def _chunks(self, op: uuid.UUID, lock: int) -> None:
        while True:
            began = self._monotonic()
            # Only while this session holds the lock: once it is gone, another replica may carry the operation.
            await self.locks.check(lock)
            try:
                operation, chunk = await self.operators.run_bulk_chunk(op, largest=self.largest_chunk)
            except Unavailable:
                raise
            except Exception as exc:  # noqa: BLE001 - anything but an outage: retrying will not mend it
                await self._fail(op, exc)
                return
            if chunk is None:
                _log_end(operation)
                return
            if self.metrics is not None and chunk.changed:
                self.metrics.bulk_changed.labels(operation.action.value).inc(chunk.changed)
            wait = pace_wait(operation.rate, chunk.changed, self._monotonic() - began)
            if wait > 0:
                await self.pace.sleep(op, wait)

    async def _fail(self, op: uuid.UUID, exc: Exception) -> None:
        error = f"{type(exc).__name__}: {exc}"
        log.error("bulk operation %s failed: %s", op, error, exc_info=exc)
        await self.operators.fail_bulk_operation(op, error[:4096])


def _log_end(operation: BulkOperation) -> None:
    log.info(
        "bulk operation %s %s: %d of %d matches changed, %d skipped",
        operation.id,
        operation.state.name,
        operation.done,
        operation.matched,
        operation.skipped,
    )
