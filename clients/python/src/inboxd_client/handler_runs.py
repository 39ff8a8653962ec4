"""One claimed event's run: its handler started, its lease renewed, its time limit kept, its claim ended.

A handler that runs past `handler_timeout` is cancelled (a sync one is told
through ctx.cancelled) and its event Failed with HandlerTimeout, counting the
attempt: a hung handler would otherwise renew its lease for ever. A handler
that cannot be stopped (a thread, or a coroutine that swallows its
cancellation) keeps its concurrency slot until it really returns: freeing it
would run more than `concurrency` handlers, and maybe its event beside itself.

With tracing on (`tracing.TRACER`), the run is a `process` span (`worker_spans`),
current from before the handler starts until the claim's end is answered, so
the handler's own spans and the fenced calls it causes are its children.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import cast

from inboxd_client import tracing
from inboxd_client.context import EventContext, SyncEventContext
from inboxd_client.fenced_calls import FencedCalls
from inboxd_client.finishing import Finisher, Job, WorkerStats
from inboxd_client.outcomes import HandlerTimeout, Ignore
from inboxd_client.renewals import keep_renewing
from inboxd_client.sync_bridge import run_in_daemon_thread
from inboxd_client.v1 import inbox_pb2

log = logging.getLogger("inboxd_client.worker")

AsyncHandler = Callable[[EventContext], Awaitable[Ignore | None]]
SyncHandler = Callable[[SyncEventContext], Ignore | None]

# After a handler timeout: how long the cancelled handler gets to record its outcomes before the Fail.
TIMEOUT_CANCEL_GRACE = 10.0


class HandlerRuns:
    """Runs a worker's handler for each of its claimed events, under that worker's lease and time limit."""

    def __init__(
        self,
        calls: FencedCalls,
        handler: AsyncHandler | SyncHandler,
        *,
        lease: float,
        handler_timeout: float | None,
        stats: WorkerStats,
        finisher: Finisher,
        clock: Callable[[], datetime],
    ) -> None:
        # Where the claims' actions, renewals and finishes go: the unary calls, or the Work stream.
        self.calls = calls
        self.lease = lease
        self.handler_timeout = handler_timeout
        self.stats = stats
        self.finisher = finisher
        self.clock = clock  # "now" for the trace's child-or-link rule
        call = getattr(handler, "__call__", handler)  # noqa: B004 - an object with async __call__ counts
        self.is_async = inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call)
        self._async_handler = cast(AsyncHandler, handler)
        self._sync_handler = cast(SyncHandler, handler)

    def job(self, event: inbox_pb2.ClaimedEvent) -> Job:
        return Job(EventContext(self.calls, event), self.is_async)

    async def run(self, job: Job) -> None:
        """Runs the job's handler and ends its claim; returns once the handler has really returned."""
        tracer = tracing.TRACER
        if tracer is None:
            await self._run(job)
            return
        from inboxd_client import worker_spans  # OpenTelemetry is there: TRACER is set

        span = worker_spans.start_process(tracer, job.context.event, self.clock)
        try:
            with worker_spans.current(span):
                await self._run(job)
        finally:
            handler = job.handler
            if job.timed_out_after is not None:
                worker_spans.record_error(span, HandlerTimeout(job.timed_out_after))
            elif handler is not None and handler.done() and not handler.cancelled() and handler.exception():
                worker_spans.record_error(span, cast(BaseException, handler.exception()))
            span.end()

    async def _run(self, job: Job) -> None:
        context = job.context
        loop = asyncio.get_running_loop()
        if self.is_async:
            job.handler = asyncio.ensure_future(self._async_handler(context))
        else:
            sync_context = SyncEventContext(context, loop)
            name = f"inboxd-handler {context.namespace}/{context.event_key}"
            job.handler = run_in_daemon_thread(loop, lambda: self._run_sync(sync_context), name)
        renewer = asyncio.create_task(keep_renewing(self.calls, job, self.lease, self.stats))
        try:
            await asyncio.wait({job.handler}, timeout=self.handler_timeout)
            if not job.handler.done() and self.handler_timeout is not None:
                log.warning("handler for %s/%s timed out: cancelling it", context.namespace, context.event_key)
                job.time_out(self.handler_timeout)
                await asyncio.wait({job.handler}, timeout=TIMEOUT_CANCEL_GRACE)
        finally:
            renewer.cancel()
        await self.finisher.finish(job)
        if not job.handler.done():
            log.warning(
                "the timed-out handler for %s/%s still runs after its event was Failed: its slot stays taken"
                " until it returns",
                context.namespace,
                context.event_key,
            )
            # Until it returns, or until shutdown's release stops the waiting (Job.interrupt).
            await asyncio.wait({job.handler})
            log.info("the timed-out handler for %s/%s returned at last", context.namespace, context.event_key)

    def _run_sync(self, context: SyncEventContext) -> Ignore | None:
        result = self._sync_handler(context)
        if inspect.isawaitable(result):
            # A plain function that returned a coroutine (a lambda around an
            # async def, say) would otherwise "succeed" without ever running it.
            raise TypeError("the handler returned an awaitable: declare it `async def` so the worker awaits it")
        return result
