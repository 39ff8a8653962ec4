"""Group commit: concurrent requests share one transaction, each answered after its commit.

PostgreSQL's ceiling is its commit rate (one WAL flush per commit). While
one transaction commits, the requests that arrive queue up; the next
transaction takes all of them. No request waits for company: a lone caller
is flushed at once, so there is no added latency, only fewer commits under
load. A submission is never split, so a caller's batch keeps its
one-transaction promise.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from inboxd.errors import InvalidArgument

Item = TypeVar("Item")
Result = TypeVar("Result")


@dataclass(eq=False)
class _Submission(Generic[Item, Result]):
    items: Sequence[Item]
    done: asyncio.Future[list[Result]] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class Coalescer(Generic[Item, Result]):
    """Runs `run_batch` over the items of many submissions at once."""

    def __init__(
        self,
        run_batch: Callable[[list[Item]], Awaitable[list[Result]]],
        *,
        max_items: int = 500,
        max_inflight: int = 2,
    ) -> None:
        self._run_batch = run_batch
        self._max_items = max_items
        # More than one transaction in flight lets one collect while another commits.
        self._slots = asyncio.Semaphore(max_inflight)
        self._queue: deque[_Submission[Item, Result]] = deque()
        self._flushers: set[asyncio.Task[None]] = set()

    async def submit(self, items: Sequence[Item]) -> list[Result]:
        """Results for `items`, in order, once the transaction holding them has committed."""
        submission: _Submission[Item, Result] = _Submission(items)
        self._queue.append(submission)
        task = asyncio.create_task(self._flush())
        self._flushers.add(task)
        task.add_done_callback(self._flushers.discard)
        # Shielded: a caller who gives up does not cancel its neighbours' transaction.
        return await asyncio.shield(submission.done)

    async def _flush(self) -> None:
        async with self._slots:
            group = self._take_group()
            if group:
                await self._run_group(group)

    def _take_group(self) -> list[_Submission[Item, Result]]:
        group: list[_Submission[Item, Result]] = []
        count = 0
        while self._queue and (not group or count + len(self._queue[0].items) <= self._max_items):
            submission = self._queue.popleft()
            group.append(submission)
            count += len(submission.items)
        return group

    async def _run_group(self, group: list[_Submission[Item, Result]]) -> None:
        items = [item for submission in group for item in submission.items]
        try:
            results = await self._run_batch(items)
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


def _fail(submission: _Submission[Item, Result], exc: BaseException) -> None:
    if not submission.done.done():
        submission.done.set_exception(exc)
