"""Group commit: concurrent requests share one transaction, each answered after its commit.

PostgreSQL's ceiling is its commit rate (one WAL flush per commit). While
one transaction commits, the requests that arrive queue up; the next
transaction takes all of them. No request waits for company: a lone caller
is flushed at once, so there is no added latency, only fewer commits under
load. A submission is never split between groups: a caller's batch goes
into one transaction with its neighbours' (or, for the few items that meet a
concurrent write of their key or a held row, into a later one as well: see
store/accepts.py and Inbox.complete_many). A group answers repeats only
after a COMMIT that waits for a synchronous standby as a write's does: the
statements see to that, and only a group with nothing else to write pays.

While tracing is on, each flushed group is one span (its statement's work),
linked both ways with the spans of the callers whose items it holds: never
a span per caller.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from opentelemetry.trace import Span, use_span

from inboxd.domain.errors import InvalidArgument
from inboxd.observability import spans, tracing

# Under load, a flusher whose last group was not small waits this long before
# taking a small next one. While the server is busy (64 callers, one core),
# requests reach the queue a few hundred µs apart, so a group taken at once
# after a commit held about 3 events. Measured in alternating runs on a quiet
# machine: 0.5 ms gave 20-33% more Accepts/s at 64 callers; 1 ms gave 35-50%
# (server CPU per Accept 407 -> 280-304 µs, PostgreSQL's 136 -> 69-79 µs) and
# 5-15% more rows/s under Claim 10 -> CompleteBatch; 3 ms cost 16 callers a
# quarter of their rate. A lone caller (groups of one) never waits.
GATHER_WINDOW = 0.001
GATHER_AFTER = 3
GATHER_BELOW = 16

Item = TypeVar("Item")
Result = TypeVar("Result")


@dataclass(eq=False, slots=True)
class _Submission(Generic[Item, Result]):
    items: Sequence[Item]
    done: asyncio.Future[list[Result]]
    # The submitter's span, while tracing is on: the group's span and it link to each other.
    caller: Span | None = None


class Coalescer(Generic[Item, Result]):
    """Runs `run_batch` over the items of many submissions at once."""

    def __init__(
        self,
        run_batch: Callable[[list[Item]], Awaitable[list[Result]]],
        *,
        max_items: int = 500,
        max_inflight: int = 2,
        parallel_at: int = 64,
        gather_window: float = GATHER_WINDOW,
        operation: str = "group_commit",
    ) -> None:
        self._run_batch = run_batch
        # The group's span name and db.operation.name: the store function its batch runs.
        self._operation = operation
        self._max_items = max_items
        # A second transaction in flight overlaps one commit with the next
        # group's work: worth a statement and a commit of its own only for
        # parallel_at items or more. Fewer wait for the one in flight and go
        # with the next group. Measured with 64 single-event callers: mean
        # groups of 8 instead of 3, a third less PostgreSQL CPU per event,
        # and 10-20% more Accepts/s; batches of 100 start at once as before.
        self._max_inflight = max_inflight
        self._parallel_at = parallel_at
        self._gather_window = gather_window
        self._flushing = 0
        self._queue: deque[_Submission[Item, Result]] = deque()
        self._queued_items = 0
        self._flushers: set[asyncio.Task[None]] = set()

    async def submit(self, items: Sequence[Item]) -> list[Result]:
        """Results for `items`, in order, once the transaction holding them has committed.

        A caller who gives up (is cancelled) only stops waiting: its items
        stay in their group, so its neighbours' transaction is never cancelled.
        """
        return await self.submit_soon(items)

    def submit_soon(self, items: Sequence[Item]) -> asyncio.Future[list[Result]]:
        """`submit` without a coroutine: the future of the results, for a caller that answers in a callback.

        An AcceptStream item costs no task of its own this way (creating one
        per item was 3% of the stream's server samples, before its steps).
        """
        done: asyncio.Future[list[Result]] = asyncio.get_running_loop().create_future()
        if tracing.TRACER is None:
            self._queue.append(_Submission(items, done))
        else:
            self._queue.append(_Submission(items, done, spans.current_span()))
        self._queued_items += len(items)
        if self._flushing == 0 or (self._flushing < self._max_inflight and self._queued_items >= self._parallel_at):
            # A flusher drains the queue group by group; at most max_inflight
            # of them run, so a burst of callers costs no task per caller.
            self._flushing += 1
            task = asyncio.create_task(self._flush_while_queued())
            self._flushers.add(task)
            task.add_done_callback(self._flushers.discard)
        return done

    async def _flush_while_queued(self) -> None:
        try:
            last = 0
            while self._queue:
                if last >= GATHER_AFTER and self._queued_items < GATHER_BELOW and self._gather_window > 0:
                    await asyncio.sleep(self._gather_window)
                group, last = self._take_group()
                await self._run_group(group)
        finally:
            self._flushing -= 1

    def _take_group(self) -> tuple[list[_Submission[Item, Result]], int]:
        """The next group from the queue, and how many items it holds."""
        group: list[_Submission[Item, Result]] = []
        count = 0
        while self._queue and (not group or count + len(self._queue[0].items) <= self._max_items):
            submission = self._queue.popleft()
            group.append(submission)
            count += len(submission.items)
        self._queued_items -= count
        return group, count

    async def _run_group(self, group: list[_Submission[Item, Result]]) -> None:
        items = [item for submission in group for item in submission.items]
        try:
            if tracing.TRACER is None:
                results = await self._run_batch(items)
            else:
                results = await self._run_traced(group, items)
        except InvalidArgument as exc:
            if len(group) == 1:
                _fail(group[0], exc)
                return
            # One caller's bad value must not fail its neighbours: each alone.
            for submission in group:
                await self._run_group([submission])
            return
        except BaseException as exc:
            for submission in group:
                _fail(submission, exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
            return
        start = 0
        for submission in group:
            end = start + len(submission.items)
            if not submission.done.done():
                submission.done.set_result(results[start:end])
            start = end

    async def _run_traced(self, group: list[_Submission[Item, Result]], items: list[Item]) -> list[Result]:
        callers = [s.caller for s in group if s.caller is not None]
        span = spans.start_group_span(self._operation, callers, len(items))
        # Current while the batch runs, so the store's log lines name it.
        with use_span(span, end_on_exit=True, record_exception=True, set_status_on_exception=True):
            return await self._run_batch(items)


def _fail(submission: _Submission[Item, Result], exc: BaseException) -> None:
    if not submission.done.done():
        submission.done.set_exception(exc)
