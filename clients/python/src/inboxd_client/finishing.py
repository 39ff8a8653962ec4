"""How a worker's claim ends: the handler's outcome turned into Complete, Fail or Release.

The server has the last word. A finishing call answered ABORTED means the
claim was taken over meanwhile: the result is refused, counted as
superseded, and never raised, since the event now belongs to another claim.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from dataclasses import dataclass

from inboxd_client.actions import describe
from inboxd_client.completions import CompletionBatcher
from inboxd_client.context import EventContext
from inboxd_client.errors import ClaimSuperseded, InboxError
from inboxd_client.fenced_calls import FencedCalls
from inboxd_client.outcomes import HandlerTimeout, Ignore, PermanentError, RetryLater
from inboxd_client.v1 import inbox_pb2, types_pb2

log = logging.getLogger("inboxd_client.worker")


@dataclass
class WorkerStats:
    """Counters of what the worker did, for logs, metrics and tests."""

    claimed: int = 0
    completed: int = 0
    ignored: int = 0
    failed: int = 0  # Fail answered PENDING: a retry is scheduled
    dead_lettered: int = 0
    released: int = 0  # given back; one the Work stream pushed again while stopping, released twice, counts once
    superseded: int = 0  # the claim was taken over: handler cancelled, or its finish refused
    renewals: int = 0
    renewal_failures: int = 0  # renewals that failed otherwise and were tried again
    errors: int = 0  # finishing calls that failed otherwise; the lease expiry returns those events


class Job:
    """One claimed event in flight: its context, its handler's future, and why it may be interrupted."""

    def __init__(self, context: EventContext, is_async: bool) -> None:
        self.context = context
        self.is_async = is_async
        self.handler: asyncio.Future[Ignore | None] | None = None
        self.lost = False
        self.releasing = False
        self.stream = 0  # the Work stream that pushed it (its number); 0: a unary Claim
        # Set once its Release, on shutdown, has gone out (on a Work stream: queued before the half-close).
        self.release_sent = asyncio.Event()
        self.timed_out_after: float | None = None

    def time_out(self, seconds: float) -> None:
        """The handler ran past the worker's handler_timeout: tell it to stop, cancel it if it is async."""
        self.timed_out_after = seconds
        self.context.cancelled.set()
        if self.handler is not None and self.is_async:
            self.handler.cancel()

    def interrupt(self, *, releasing: bool) -> None:
        """The claim was lost (`releasing=False`) or shutdown is giving the event back."""
        if releasing:
            self.releasing = True
        else:
            self.lost = True
        self.context.cancelled.set()
        # A thread cannot be cancelled. A lost sync handler is waited for (it
        # holds its concurrency slot, and ctx.cancelled tells it to return);
        # on release the waiting stops, since shutdown cannot wait for ever.
        if self.handler is not None and (self.is_async or releasing):
            self.handler.cancel()


class Finisher:
    """Ends claims for a worker, and counts how each ended in `stats`."""

    def __init__(self, client: FencedCalls, stats: WorkerStats, completions: CompletionBatcher) -> None:
        self.client = client
        self.stats = stats
        # Completions that finish together share one CompleteBatch; each still learns its own answer.
        self.completions = completions
        # While stopping: the events given back so far (see `stopping`).
        self._given_back: set[tuple[str, str]] | None = None

    async def finish(self, job: Job) -> None:
        """Ends the job's claim as its handler's end says; never raises an InboxError."""
        await self._safely(job.context.event, self._finish(job))

    async def release(self, event: inbox_pb2.ClaimedEvent, sent: Awaitable[object] | None = None) -> None:
        """Gives a claimed event back without counting the attempt; never raises an InboxError.

        `sent`: the Release already went out (with a Work stream's half-close); this awaits its answer.
        """
        await self._safely(event, self._release(event, sent))

    def stopping(self) -> None:
        """From now on an event released twice (the Work stream pushed it again meanwhile) counts once."""
        if self._given_back is None:
            self._given_back = set()

    async def _finish(self, job: Job) -> None:
        event, handler = job.context.event, job.handler
        assert handler is not None and (handler.done() or job.timed_out_after is not None)
        if job.timed_out_after is not None and not job.lost:
            # Whatever the handler did once told to stop, this attempt ran out of time: it counts.
            await self._fail(event, HandlerTimeout(job.timed_out_after))
            return
        if handler.cancelled():
            if job.releasing:
                releasing = self._release(event)
                job.release_sent.set()  # its waiter runs once this task waits for the answer: the call is out
                await releasing
            elif job.lost:
                self.stats.superseded += 1
            else:
                await self._fail(event, asyncio.CancelledError("the handler was cancelled"))
            return
        error = handler.exception()
        if error is not None:
            await self._fail(event, error)
            return
        result = handler.result()
        reason = result.reason if isinstance(result, Ignore) else job.context.ignored_reason
        if reason:
            await self.completions.complete(event, disposition=types_pb2.DISPOSITION_IGNORED, reason=reason)
            self.stats.ignored += 1
        else:
            await self.completions.complete(event)
            self.stats.completed += 1

    async def _fail(self, event: inbox_pb2.ClaimedEvent, error: BaseException) -> None:
        log.warning("handler failed for %s/%s", event.namespace, event.event_key, exc_info=error)
        text = describe(error)
        if isinstance(error, PermanentError):
            answer = await self.client.fail(event, text, permanent=True)
        elif isinstance(error, RetryLater):
            answer = await self.client.fail(event, text, retry_after=error.retry_after)
        else:
            answer = await self.client.fail(event, text)
        if answer.state == types_pb2.EVENT_STATE_DEAD_LETTERED:
            self.stats.dead_lettered += 1
        else:
            self.stats.failed += 1

    async def _release(self, event: inbox_pb2.ClaimedEvent, sent: Awaitable[object] | None = None) -> None:
        await (self.client.release(event) if sent is None else sent)
        if self._given_back is not None:
            key = (event.namespace, event.event_key)
            if key in self._given_back:
                return
            self._given_back.add(key)
        self.stats.released += 1

    async def _safely(self, event: inbox_pb2.ClaimedEvent, finishing: Awaitable[None]) -> None:
        try:
            await finishing
        except ClaimSuperseded:
            self.stats.superseded += 1
            log.warning("the claim of %s/%s was superseded: its result is refused", event.namespace, event.event_key)
        except InboxError as exc:
            self.stats.errors += 1
            log.error("could not finish %s/%s; its lease will expire: %s", event.namespace, event.event_key, exc)
