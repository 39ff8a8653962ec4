"""Worker: takes events, runs a handler for each, keeps their leases alive, and ends every claim.

The events come over the Work stream by default (`work_stream`): the worker
subscribes, gives credit for its free slots, and the server pushes events as
they become claimable and keeps their leases alive while the stream lives;
the fenced calls go over the same stream (`fenced_calls.CallRoute`). Against
a server without it (UNIMPLEMENTED), found out once at run time, the worker
claims with unary Claims instead (`claim_loop`); `use_streams` forces
either way. Either way an event runs as a job (`running_jobs`).

Each claimed event runs its handler (`handler_runs`) under a lease renewed
every third of its length (`renewals`; on the stream, where the server keeps
the lease alive too, a renewal's ABORTED is how a handler learns its claim
was lost). The handler's end decides the claim's: it returned (Complete),
it returned `Ignore` or called `ctx.ignore` (Complete as IGNORED), it raised
(Fail: retryable, or permanent for PermanentError), it ran past
`handler_timeout` (Fail, the attempt counted). A renewal answered ABORTED
means another worker took the event over: the handler is cancelled, and
anything it still tries to finish is refused. So does a Work stream that
broke: the server ended its claims with it.

On the unary path completions ride the worker's next Claim (`claim_loop`);
on the stream they go as one CompleteBatch per window over the stream.

`stop()` (or SIGTERM/SIGINT) stops claiming (on the stream: gives no more
credit) at once, sends the completions that wait, lets running handlers
finish within `grace` seconds, then cancels the rest and Releases their
events, which does not count their attempts (`draining`); an event pushed
meanwhile is released at once. Then the stream half-closes. A second signal
skips the grace.

A server that stops tells its Work streams (`draining`, with its grace):
the worker gives that stream no more credit, lets its running handlers
finish until shortly before the grace ends, then releases their events
(the attempt not counted), and goes on with the stream opened again, on
another replica or the restarted server.

Tracing (`tracing`, README "Tracing"): with OpenTelemetry's OTEL_* variables
set for export, or a tracer provider the application installed, each handler
run is a `process` span and each action an `action` span; off, nothing of it
is made.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime

from inboxd_client import builders, tracing
from inboxd_client.aio_client import AsyncInboxClient
from inboxd_client.claim_backoff import ClaimPacer
from inboxd_client.claim_loop import ClaimLoop
from inboxd_client.completions import DEFAULT_MAX_ITEMS, DEFAULT_WINDOW, CompletionBatcher
from inboxd_client.default_logging import log_by_default
from inboxd_client.draining import RELEASE_TIMEOUT, drain, install_stop_signals, release_within
from inboxd_client.errors import Unimplemented
from inboxd_client.fenced_calls import CallRoute
from inboxd_client.finishing import Finisher, Job, WorkerStats
from inboxd_client.handler_runs import AsyncHandler, HandlerRuns, SyncHandler
from inboxd_client.running_jobs import RunningJobs
from inboxd_client.v1 import inbox_pb2
from inboxd_client.work_stream import WorkStream

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
    answer. `use_streams`: None (the default) takes events over the Work
    stream, or by unary Claims from a server without it; True or False
    forces one way. `clock` is the worker's "now" where wall time matters to
    it: the age of an event's trace, for tracing's child-or-link rule.
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
        use_streams: bool | None = None,
        clock: Callable[[], datetime] | None = None,
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
        self.use_streams = use_streams
        self.stats = WorkerStats()
        # The claims' fenced calls go over the Work stream while there is one, else as unary calls.
        self._route = CallRoute(client)
        self.completions = CompletionBatcher(self._route, window=complete_window, max_items=complete_batch)
        self._finisher = Finisher(self._route, self.stats, self.completions)
        self._pacer = ClaimPacer()
        self._runs = HandlerRuns(
            self._route,
            handler,
            lease=lease,
            handler_timeout=handler_timeout,
            stats=self.stats,
            finisher=self._finisher,
            clock=clock or _utc_now,
        )
        self._jobs = RunningJobs(self._runs, self._finisher, self.stats, concurrency)
        self._stream: WorkStream | None = None
        self._unstarted: list[inbox_pb2.ClaimedEvent] = []  # pushed on the stream as the worker stopped
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = asyncio.Event()
        self._claims = ClaimLoop(self, self._jobs, self._pacer, self._stopping, self._take)
        self._hurry = asyncio.Event()
        self._stop_requested = False
        self._stopped_at: float | None = None

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
        self._finisher.stopping()
        if self._stream is not None:
            self._stream.stop_crediting()
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
        log_by_default()
        tracing.start()  # raises for an OTEL_* setting it cannot honour, before anything is claimed
        log.info(
            "worker %s started: namespaces %s, up to %d events at a time",
            self.worker_id,
            ", ".join(self.namespaces),
            self.concurrency,
        )
        if self._stop_requested:
            self._begin_stop()
        installed = install_stop_signals(loop, self._on_signal) if handle_signals else []
        try:
            await self._feed()
        except asyncio.CancelledError:
            self._hurry.set()  # cancelled from outside: no grace
            raise
        finally:
            self._begin_stop()
            try:
                await self._drain()
                if self._stream is not None:
                    await self._close_stream(self._stream)
            finally:
                retired = tracing.detach()  # the last worker takes down the provider set up for it (below)
                for sig in installed:
                    loop.remove_signal_handler(sig)
                done = self.stats
                log.info(
                    "worker %s stopped: %d claimed, %d completed, %d failed, %d dead-lettered, %d released",
                    self.worker_id,
                    done.claimed,
                    done.completed + done.ignored,
                    done.failed,
                    done.dead_lettered,
                    done.released,
                )
                if retired is not None:
                    # Its flush may wait for an unreachable collector up to the exporter's timeout: not on the loop.
                    await asyncio.to_thread(retired.shutdown)

    async def _drain(self) -> None:
        """Lets running handlers finish until the grace period ends, then releases the rest."""
        assert self._stopped_at is not None and self._loop is not None
        remaining = self._stopped_at + self.grace - self._loop.time()
        releasing = None if self._stream is None else self._half_close_behind
        await drain(
            self._jobs.tasks, self._jobs.side_tasks, remaining=remaining, hurry=self._hurry, releasing=releasing
        )

    async def _half_close_behind(self, late: Mapping[asyncio.Task[None], Job]) -> None:
        """Once the late jobs' Releases are out, half-closes the stream behind them (and the unstarted ones').

        An event released before the half-close reached the server would be
        claimed again at once on the stream's outstanding credit, then ended
        by the half-close with its attempt counted.
        """

        async def sent_or_done(task: asyncio.Task[None], job: Job) -> None:
            sent = asyncio.ensure_future(job.release_sent.wait())
            try:
                await asyncio.wait({task, sent}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                sent.cancel()

        await asyncio.wait(
            [asyncio.ensure_future(sent_or_done(t, j)) for t, j in late.items()], timeout=RELEASE_TIMEOUT
        )
        assert self._stream is not None
        self._half_close(self._stream)

    def _half_close(self, stream: WorkStream) -> None:
        """Half-closes behind a Release for each event pushed as the worker stopped: none comes back."""
        unstarted, self._unstarted = self._unstarted, []
        for event, sent in zip(unstarted, stream.half_close(releasing=unstarted), strict=True):
            self._jobs.release(event, sent)

    async def _close_stream(self, stream: WorkStream) -> None:
        self._half_close(stream)  # unless the drain did
        await stream.close()
        if self._jobs.side_tasks:
            await asyncio.wait(set(self._jobs.side_tasks), timeout=RELEASE_TIMEOUT)

    # -- taking events --

    async def _feed(self) -> None:
        """Takes events until stopping: pushed on the Work stream, or claimed by unary Claims without one."""
        if self.use_streams is not False:
            try:
                await self._take_pushed()
                return
            except Unimplemented:
                if self.use_streams:
                    raise
                log.info("the server has no Work stream: claiming with unary Claims")
                self._route.stream = self._stream = self._jobs.on_slot_freed = None
        await self._claims.run()

    async def _take_pushed(self) -> None:
        """Keeps the Work stream open until stopping; raises what refused it for good (Unimplemented: none here)."""
        subscription = inbox_pb2.WorkSubscription(
            namespaces=self.namespaces,
            event_types=self.event_types,
            lease=builders.duration(self.lease),
            worker_id=self.worker_id,
        )
        stream = self.client.work_stream(
            subscription,
            free_slots=self._jobs.free,
            on_events=self._take,
            on_broken=self._jobs.lose,
            pacer=self._pacer,
            on_draining=self._server_draining,
        )
        self._route.stream = self._stream = stream
        self._jobs.on_slot_freed = stream.top_up
        if self._stopping.is_set():
            stream.stop_crediting()
        runner = stream.open().runner
        assert runner is not None
        stopping = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({runner, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
        if runner.done():
            runner.result()  # raises what ended it

    def _server_draining(self, stream: int, grace: float) -> None:
        """Work stream `stream`'s server stops: its running handlers get most of its `grace`, then are released."""
        running = sum(1 for job in self._jobs.tasks.values() if job.stream == stream)
        within = release_within(grace)
        log.info(
            "the server is stopping: no more events on this Work stream; %d running handlers get %.1f s,"
            " then their events are released; the stream opens again once it ends",
            running,
            within,
        )
        if running:
            asyncio.get_running_loop().call_later(within, self._give_back, stream)

    def _give_back(self, stream: int) -> None:
        if self._stream is not None and self._stream.opened == stream:  # else it ended: the server released them
            self._jobs.give_back(stream)

    def _take(self, stream: int, events: Sequence[inbox_pb2.ClaimedEvent]) -> None:
        """Starts each event (pushed on Work stream `stream`; 0: claimed); one that came as we stop goes back."""
        for event in events:
            if self._stopping.is_set() and stream:
                # Released with the half-close: released now, it could be pushed here again at once.
                self._unstarted.append(event)
            elif self._stopping.is_set():
                self._jobs.release(event)
            else:
                self._jobs.start(event, stream=stream)


def _utc_now() -> datetime:
    return datetime.now(UTC)
