"""Worker: claims events, runs a handler for each, keeps their leases alive, and ends every claim.

Each claimed event runs its handler (`handler_runs`) under a lease renewed
every third of its length (`renewals`). The handler's end decides the
claim's: it returned (Complete), it returned `Ignore` or called `ctx.ignore`
(Complete as IGNORED), it raised (Fail: retryable, or permanent for
PermanentError), it ran past `handler_timeout` (Fail, the attempt counted).
A renewal answered ABORTED means another worker took the event over: the
handler is cancelled, and anything it still tries to finish is refused.

Completions ride the worker's next Claim (ClaimRequest.completions), so a
busy worker's cycle is one call: a handler's event is reported done only
once that Claim's answer says the server committed it, and its concurrency
slot stays taken until then. While a long-poll is out (or after a failed
Claim, or when stopping) they go as a CompleteBatch instead, so no
completion waits for a poll; a server that ignores a Claim's completions is
detected by its answer, and CompleteBatch is used from then on. Between
Claims the worker paces itself (`claim_backoff`): after a failure, after an
empty `wait=0` answer, and with a smaller batch after an answer too big to
receive.

`stop()` (or SIGTERM/SIGINT) stops claiming at once, sends the completions
that wait, lets running handlers finish within `grace` seconds, then cancels
the rest and Releases their events, which does not count their attempts
(`draining`). A second signal skips the grace.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Coroutine, Iterable, Sequence
from typing import Any

from inboxd_client.aio_client import AsyncInboxClient
from inboxd_client.claim_backoff import TRANSIENT_CLAIM_ERRORS, ClaimPacer
from inboxd_client.completions import DEFAULT_MAX_ITEMS, DEFAULT_WINDOW, CompletionBatcher, Pending
from inboxd_client.draining import drain, install_stop_signals
from inboxd_client.errors import claim_completion_outcomes
from inboxd_client.finishing import Finisher, Job, WorkerStats
from inboxd_client.handler_runs import AsyncHandler, HandlerRuns, SyncHandler
from inboxd_client.v1 import inbox_pb2

log = logging.getLogger(__name__)

# 15 minutes: far beyond a webhook's work (seconds), short of "for ever", and the
# age at which the server already counts an INTENDED action as unresolved
# (INBOXD_ACTION_STALE_AFTER). Longer jobs pass their own; None turns it off.
DEFAULT_HANDLER_TIMEOUT = 15 * 60.0


class Worker:
    """Runs `handler` for every event claimed from `namespaces`, at most `concurrency` at a time.

    The handler is `async def handler(ctx: EventContext)`, or a plain function
    taking a `SyncEventContext` (run in a thread). Durations are in seconds:
    `lease` is each claim's lease, `wait` how long one Claim long-polls, `grace`
    how long stop() lets running handlers finish, `handler_timeout` how long
    one handler may run before it is cancelled and its event Failed. Completions
    that finish within `complete_window` seconds of each other (up to
    `complete_batch`) go out together, in the next Claim or, while a Claim
    long-polls, as one CompleteBatch; each handler's event still gets its own
    answer.
    """

    def __init__(
        self,
        client: AsyncInboxClient,
        handler: AsyncHandler | SyncHandler,
        *,
        namespaces: Iterable[str] = (),
        event_types: Iterable[str] = (),
        concurrency: int = 10,
        lease: float = 30.0,
        wait: float = 10.0,
        grace: float = 20.0,
        worker_id: str | None = None,
        handler_timeout: float | None = DEFAULT_HANDLER_TIMEOUT,
        complete_window: float = DEFAULT_WINDOW,
        complete_batch: int = DEFAULT_MAX_ITEMS,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency={concurrency}: needs at least 1")
        if not 1.0 <= lease <= 3600.0:
            raise ValueError(f"lease={lease}: the server takes 1 s to 1 h")
        if not 0.0 <= wait <= 60.0:
            raise ValueError(f"wait={wait}: the server takes 0 to 60 s")
        if grace < 0:
            raise ValueError(f"grace={grace}: cannot be negative")
        if handler_timeout is not None and handler_timeout <= 0:
            raise ValueError(f"handler_timeout={handler_timeout}: must be positive (None: no timeout)")
        self.client = client
        self.namespaces = list(namespaces)
        self.event_types = list(event_types)
        self.concurrency = concurrency
        self.lease = lease
        self.wait = wait
        self.grace = grace
        self.handler_timeout = handler_timeout
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}"
        self.stats = WorkerStats()
        self.completions = CompletionBatcher(client, window=complete_window, max_items=complete_batch)
        self._finisher = Finisher(client, self.stats, self.completions)
        self._pacer = ClaimPacer()
        self._runs = HandlerRuns(
            client, handler, lease=lease, handler_timeout=handler_timeout, stats=self.stats, finisher=self._finisher
        )
        self._jobs: dict[asyncio.Task[None], Job] = {}
        self._side_tasks: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = asyncio.Event()
        self._hurry = asyncio.Event()
        self._slot_freed = asyncio.Event()
        self._stop_requested = False
        self._stopped_at: float | None = None
        # Whether the server commits a Claim's completions: unknown (None) until a Claim carried some.
        self._carries: bool | None = None

    # -- starting and stopping --

    def stop(self) -> None:
        """Stops claiming; running handlers get `grace` seconds, then their events are released. Thread-safe."""
        self._stop_requested = True
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._begin_stop)

    def _begin_stop(self) -> None:
        if self._stopped_at is None:
            self._stopped_at = asyncio.get_running_loop().time()
            log.info("worker %s stopping: no more claims; %d handlers running", self.worker_id, len(self._jobs))
        self._stopping.set()
        # No Claim will carry them now: what waits goes out at once, and later ones after their window.
        self.completions.hold_for_claims(False)
        self.completions.flush()

    def _on_signal(self) -> None:
        if self._stopping.is_set():
            log.info("second stop signal: releasing running events without waiting")
            self._hurry.set()
        self._begin_stop()

    async def run(self, *, handle_signals: bool = True) -> None:
        """Claims and handles events until stop(); returns once every claim is finished or released.

        With `handle_signals` (in the main thread), SIGTERM and SIGINT call stop().
        A Claim error that waiting cannot fix (UNAUTHENTICATED, say) is raised
        after the running handlers are drained the same way.
        """
        loop = asyncio.get_running_loop()
        self._loop = loop
        if self._stop_requested:
            self._begin_stop()
        installed = install_stop_signals(loop, self._on_signal) if handle_signals else []
        try:
            await self._claim_loop()
        except asyncio.CancelledError:
            self._hurry.set()  # cancelled from outside: no grace
            raise
        finally:
            self._begin_stop()
            try:
                await self._drain()
            finally:
                for sig in installed:
                    loop.remove_signal_handler(sig)

    async def _drain(self) -> None:
        """Lets running handlers finish until the grace period ends, then releases the rest."""
        assert self._stopped_at is not None and self._loop is not None
        remaining = self._stopped_at + self.grace - self._loop.time()
        await drain(self._jobs, self._side_tasks, remaining=remaining, hurry=self._hurry)

    # -- claiming --

    async def _claim_loop(self) -> None:
        try:
            while not self._stopping.is_set():
                carrying = self._carries is not False
                self.completions.hold_for_claims(carrying)
                if carrying and self.completions.waiting:
                    if not self.completions.due.is_set():
                        # At most the completion window: then they ride the Claim below.
                        await self._until(self.completions.due)
                        continue
                    claiming = self._claim_carrying(self.completions.take())
                else:
                    free = self.concurrency - len(self._jobs)
                    if free <= 0:
                        self._slot_freed.clear()
                        await self._until(self._slot_freed, also=self.completions.due)
                        continue
                    # A long-poll would keep completions waiting: while it is out, they go as a CompleteBatch.
                    self.completions.hold_for_claims(carrying and self.wait == 0)
                    claiming = self._poll(free)
                try:
                    events = await claiming
                except TRANSIENT_CLAIM_ERRORS as exc:
                    self.completions.hold_for_claims(False)
                    await self._until(self._stopping, self._pacer.failed(exc))
                    continue
                if events is None:
                    continue  # no slot for a Claim after all: its completions went as a CompleteBatch
                for event in events:
                    if self._stopping.is_set():
                        self._spawn_release(event)  # claimed as we stopped: hand it straight back
                    else:
                        self._start(event)
                # After an empty Claim a long-polling worker's next one waits at
                # the server; a wait=0 worker's cannot, so it waits here, unless
                # completions come due (they ride the next Claim).
                pause = self._pacer.answered(len(events), long_polls=self.wait > 0)
                if pause:
                    await self._until(self.completions.due, pause)
        finally:
            self.completions.hold_for_claims(False)

    def _claim(
        self, free: int, wait: float, completions: Sequence[inbox_pb2.CompleteRequest] = ()
    ) -> Coroutine[Any, Any, inbox_pb2.ClaimResponse]:
        """This worker's Claim for up to `free` events (at most a Claim's limit), carrying `completions`."""
        return self.client.claim(
            namespaces=self.namespaces,
            event_types=self.event_types,
            max_events=self._pacer.max_events(free),
            lease=self.lease,
            wait=wait,
            worker_id=self.worker_id,
            completions=completions,
        )

    async def _claim_carrying(self, carried: list[Pending]) -> list[inbox_pb2.ClaimedEvent] | None:
        """A Claim that first commits `carried`: the worker's cycle in one call instead of two.

        A completion holds its event's concurrency slot until the server has
        answered for it, as a CompleteBatch's would; but the server commits a
        Claim's completions before it leases anything, so this Claim may ask
        for their slots too without the worker ever holding more than
        `concurrency` leased events. It never long-polls: the handlers whose
        events these are wait for the answer. None: no slot for a Claim, so none was sent.
        """
        free = self.concurrency - len(self._jobs) + len(carried)
        if free < 1:
            self.completions.send(carried)
            return None
        try:
            answer = await self._claim(free, 0, [request for request, _ in carried])
        except BaseException:
            # In doubt: the server may have committed them or not. Sent again
            # (as a CompleteBatch, with its retries), a committed one answers OK.
            self.completions.send(carried)
            raise
        events = list(answer.events)
        if len(answer.completion_results) != len(carried):
            # A server older than ClaimRequest.completions ignored them: complete them as before, from now on.
            log.info("the server does not commit a Claim's completions: sending them as CompleteBatch")
            self._carries = False
            self.completions.send(carried)
            allowed = max(self.concurrency - len(self._jobs), 0)
            for event in events[allowed:]:
                self._spawn_release(event)  # it leased into the slots of the completions it ignored
            return events[:allowed]
        self._carries = True
        self.completions.answer(carried, claim_completion_outcomes(answer, len(carried)))
        return events

    async def _until(
        self, event: asyncio.Event, seconds: float | None = None, *, also: asyncio.Event | None = None
    ) -> None:
        """Waits for `event` (or `also`) or for stopping, whichever comes first (or `seconds`)."""
        events = [event, self._stopping] if also is None else [event, also, self._stopping]
        waiters = {asyncio.ensure_future(e.wait()) for e in events}
        try:
            await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()

    async def _poll(self, free: int) -> list[inbox_pb2.ClaimedEvent]:
        claim = asyncio.ensure_future(self._claim(free, self.wait))
        stopping = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({claim, stopping}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            claim.cancel()
            raise
        finally:
            stopping.cancel()
        if not claim.done():
            # Stopping: abandon the long-poll rather than wait it out. The
            # server hands back whatever a Claim cancelled mid-way had taken,
            # attempts uncounted; a claim that answered meanwhile is released.
            claim.cancel()
            await asyncio.wait({claim})
        if claim.cancelled():
            return []
        return list(claim.result().events)

    def _start(self, event: inbox_pb2.ClaimedEvent) -> None:
        job = self._runs.job(event)
        task = asyncio.create_task(self._runs.run(job), name=f"inboxd {event.namespace}/{event.event_key}")
        self._jobs[task] = job
        task.add_done_callback(self._job_done)
        self.stats.claimed += 1

    def _job_done(self, task: asyncio.Task[None]) -> None:
        self._jobs.pop(task, None)
        self._slot_freed.set()
        if not task.cancelled() and task.exception() is not None:
            log.error("event task crashed", exc_info=task.exception())

    def _spawn_release(self, event: inbox_pb2.ClaimedEvent) -> None:
        task = asyncio.create_task(self._finisher.release(event))
        self._side_tasks.add(task)
        task.add_done_callback(self._side_tasks.discard)
