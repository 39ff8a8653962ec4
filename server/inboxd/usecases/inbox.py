"""The inbox's use cases, between the gRPC servicers and the store.

It takes validated domain values from the api layer and writes no SQL; it
decides what runs in one transaction, who is woken afterwards, and tells its
observer (metrics, the structured log) each committed transition and each
fenced call refused because its claim is not current. The observer hears
nothing before the commit. The reports stand in the transitions themselves,
not in a subclass re-declaring each of them: a transition added here cannot
go unreported by being forgotten there. The Claim path (the long poll, the
answer's byte budget, a cancelled Claim's events handed back) stands in
claiming.py, a base of the Inbox.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from inboxd.config.settings import Settings
from inboxd.domain.backoff import BackoffPolicy, FailureDecision, decide_failure
from inboxd.domain.errors import ClaimSuperseded, InboxError
from inboxd.domain.subscriptions import fanned_out
from inboxd.domain.vocabulary import (
    AcceptResult,
    ActionRecord,
    ActionState,
    Completion,
    Disposition,
    FailResult,
    Fence,
    NewEvent,
)
from inboxd.observability.transition_observer import InboxObserver
from inboxd.runtime.claimable import DueWakeUps, FreedKeys
from inboxd.runtime.due_poller import DuePoller
from inboxd.runtime.group_commit import Coalescer
from inboxd.runtime.wakeups import WakeBus
from inboxd.store import actions, claims
from inboxd.store.accepts import accept_events
from inboxd.store.database import Connection, Database
from inboxd.store.notifications import ReplicaSignals
from inboxd.store.subscriptions import FanOutMode
from inboxd.usecases.claiming import CLAIM_ANSWER_BYTES, FALLBACK_POLL_SECONDS, Claiming
from inboxd.usecases.live_streams import WorkStreams

# The Claim path's bounds are named here still, where the Inbox's callers and tests find them.
__all__ = [
    "CLAIM_ANSWER_BYTES",
    "COMPLETE_LOCK_TIMEOUT",
    "FALLBACK_POLL_SECONDS",
    "HELD_RESUBMITS",
    "MAX_ERROR_BYTES",
    "Clock",
    "Inbox",
    "database_clock",
    "truncate_error",
]

# The clock: None means "the database's now()", so replicas agree on time.
Clock = Callable[[], datetime | None]

MAX_ERROR_BYTES = 4096
# How long a completion waits for an event row another transaction holds
# before it answers UNAVAILABLE (nothing changed; retry).
COMPLETE_LOCK_TIMEOUT = timedelta(seconds=1)
# How many later groups an item whose row was held rides in before it waits
# alone: each group is a round trip, by which a claim holding the row in
# passing has committed (measured: 2.7% of items under Claim 10 ->
# CompleteBatch met a held row; they cost 15% of PostgreSQL's time waiting alone).
HELD_RESUBMITS = 2


def database_clock() -> datetime | None:
    return None


@dataclass
class Inbox(Claiming):
    db: Database
    settings: Settings
    clock: Clock = database_clock
    bus: WakeBus = field(default_factory=WakeBus)
    signals: ReplicaSignals | None = None
    # Hears nothing by default; the server wires in metrics and the transition log.
    observer: InboxObserver = field(default_factory=InboxObserver)
    fallback_poll_seconds: float = FALLBACK_POLL_SECONDS
    complete_lock_timeout: timedelta = COMPLETE_LOCK_TIMEOUT
    claim_answer_bytes: int = CLAIM_ANSWER_BYTES
    _background: set[asyncio.Task[object]] = field(default_factory=set)

    @property
    def backoff(self) -> BackoffPolicy:
        s = self.settings
        return BackoffPolicy(base=s.backoff_base, factor=s.backoff_factor, cap=s.backoff_cap)

    # -- accepting --

    def __post_init__(self) -> None:
        self._accepts: Coalescer[NewEvent, AcceptResult] = Coalescer(self._accept_group, operation="accept_events")
        self._completions: Coalescer[Completion, InboxError | None] = Coalescer(
            self._complete_group, operation="complete_events"
        )
        self._poller = DuePoller(self.db, self.bus, self.clock, lambda: self.fallback_poll_seconds, self._ignore_stale)
        self._turns = {}
        self._at_limit = {}
        self.flow_throttled = collections.Counter()
        # Whom a transition wakes beyond its own events' kinds: see runtime/claimable.py.
        self._later = DueWakeUps(self.wake_claimers)
        self._freed = FreedKeys(self.db, self.wake_claimers, self.clock, self._ignore_stale)
        # The live Work streams of this process (usecases/streams.py).
        self.streams = WorkStreams(self)
        # Which accept statement to run: the lean one while no subscription stands (store/subscriptions.py).
        self.fan_out = FanOutMode()

    async def accept(self, events: Sequence[NewEvent]) -> list[AcceptResult]:
        """Accepts events; each is answered once committed (accept_events says in how many transactions).

        The events share a transaction with concurrent callers' (group commit);
        a repeat's answer waits for the synchronous standby as a write would.
        """
        return await self._accepts.submit(events)

    def accept_soon(self, events: Sequence[NewEvent]) -> asyncio.Future[list[AcceptResult]]:
        """`accept` as a future rather than a coroutine (its results, or its error, once committed)."""
        return self._accepts.submit_soon(events)

    async def _accept_group(self, events: list[NewEvent]) -> list[AcceptResult]:
        now = self.clock()
        settled: list[AcceptResult | None] = [None] * len(events)
        copied: list[tuple[int, str]] = []
        try:
            results = await accept_events(self.db, events, now, settled=settled, copies=copied, mode=self.fan_out)
        finally:
            # Even when a later round failed: what an earlier round committed is claimable, now or when due.
            self._later.accepted(events, settled, now)
            if copied:
                # Subscriptions' copies (fan-out) are events of their own: their claimers are woken too.
                copies, copy_results = fanned_out(events, settled, copied)
                self._later.accepted(copies, copy_results, now)
                # Not Accepts (inboxd_accepts_total counts those), but new events of their namespaces.
                self.observer.copied(copies)
        # Per group, not per call: counters move and the log writes once for
        # all the callers who shared the transaction.
        self.observer.accepted(events, results)
        return results

    def wake_claimers(self, counts: Mapping[tuple[str, str], int]) -> None:
        """Tells waiting Claims, here and on other replicas, how many events of each (namespace, type) are claimable."""
        for (namespace, event_type), count in counts.items():
            self.bus.notify(namespace, event_type, count)
        if counts and self.signals is not None:
            self.signals.publish(counts)

    def wake_when_due(self, delay: timedelta, namespace: str, event_type: str) -> None:
        """Wakes for one event of this kind once `delay` has passed (a bulk replay's event at its turn)."""
        self._later.after(delay, namespace, event_type)

    def wake_next_of_keys(self, finished: Sequence[tuple[str, str]]) -> None:
        """Wakes for the next events of the keys these (namespace, event_key) held, finished and committed."""
        self._freed.finished(finished)

    def on_replica_signal(self, events: list[tuple[str, str, int]] | None) -> None:
        """Another replica made events claimable (None: it may have, look again)."""
        if events is None:
            # One look by the poller on behalf of every waiter, not a stampede of claims.
            self._poller.poke()
            return
        for namespace, event_type, count in events:
            self.bus.notify(namespace, event_type, count)

    # -- fenced transitions --

    @contextlib.contextmanager
    def _fenced(self, call: str, fence: Fence) -> Iterator[None]:
        """Reports a refusal because the claim is not current, and lets it go on to the caller."""
        try:
            yield
        except ClaimSuperseded:
            self.observer.stale_claim_rejected(call, fence)
            raise

    async def renew_lease(self, fence: Fence, lease: timedelta) -> datetime:
        now = self.clock()
        with self._fenced("RenewLease", fence):
            # A single fenced UPDATE; when it matches nothing, the diagnosis is a read of its own.
            return await self.db.run(lambda conn: claims.renew_lease(conn, fence, lease, now), transaction=False)

    async def complete(self, fence: Fence, disposition: Disposition, reason: str) -> None:
        """Completes the claim; concurrent completions share one transaction."""
        with self._fenced("Complete", fence):
            [refusal] = await self._complete_all([Completion(fence, disposition, reason)])
            if refusal is not None:
                raise refusal
        self.observer.completed(fence, disposition)

    async def complete_many(self, completions: Sequence[Completion]) -> list[InboxError | None]:
        """Completes each claim, judged alone: per item None (done) or its refusal, in order.

        The items go into one transaction as one submission (shared with
        concurrent callers), except an item whose row another transaction
        holds: it is retried on its own afterwards (see `_complete_all`).
        """
        results = await self._complete_all(completions)
        for completion, result in zip(completions, results, strict=True):
            if result is None:
                self.observer.completed(completion.fence, completion.disposition)
            elif isinstance(result, ClaimSuperseded):
                self.observer.stale_claim_rejected("CompleteBatch", completion.fence)
        return results

    async def _complete_all(self, completions: Sequence[Completion]) -> list[InboxError | None]:
        results = await self._completions.submit(completions)
        # A row held by another transaction was skipped, not waited for, so it
        # held nobody else back. Most holders are claims that locked the row in
        # passing (a SKIP LOCKED claim locks a row it then finds taken, until it
        # commits a few milliseconds later): the item rides in the next groups.
        # Only a row still held after that (a worker completing in its own
        # transaction, say) waits, alone and bounded, outside the groups.
        for attempt in range(HELD_RESUBMITS + 1):
            held = _held(results)
            if not held:
                break
            retry = [completions[i] for i in held]
            if attempt < HELD_RESUBMITS:
                again = await self._completions.submit(retry)
            else:
                again = await asyncio.gather(*(self._complete_held(c) for c in retry))
            for i, result in zip(held, again, strict=True):
                results[i] = result
        self._freed.completed(completions, results)
        if self._at_limit:
            self.slots_freed({c.fence.namespace for c, r in zip(completions, results, strict=True) if r is None})
        return results

    async def _complete_group(self, completions: list[Completion]) -> list[InboxError | None]:
        now = self.clock()
        return await self.db.run(lambda conn: claims.complete_events(conn, completions, now), transaction=False)

    async def _complete_held(self, completion: Completion) -> InboxError | None:
        now = self.clock()
        timeout = self.complete_lock_timeout
        return await self.db.run(lambda conn: claims.complete_event_waiting(conn, completion, timeout, now))

    async def fail(self, fence: Fence, error: str, *, permanent: bool, retry_after: timedelta | None) -> FailResult:
        now = self.clock()
        stored_error = truncate_error(error)

        async def work(conn: Connection) -> tuple[FailureDecision, claims.Failed]:
            attempt = await claims.lock_for_failure(conn, fence)
            decision = decide_failure(
                attempt=attempt,
                max_attempts=self.settings.max_attempts,
                permanent=permanent,
                retry_after=retry_after,
                policy=self.backoff,
            )
            return decision, await claims.fail_event(conn, fence, decision, stored_error, now)

        with self._fenced("Fail", fence):
            decision, failed = await self.db.run(work)
        result = FailResult(decision.state, failed.next_at)
        if failed.next_at is not None and decision.delay is not None:
            # Claimable again once the retry is due, now or later: the event still holds its key, if any.
            self._later.after(decision.delay, fence.namespace, failed.event_type)
        elif failed.ordering_key:
            self._freed.finished([(fence.namespace, fence.event_key)])
        self.observer.failed(fence, result)
        return result

    async def record_action(
        self, fence: Fence, action: str, state: ActionState, *, external_ref: str, detail: str
    ) -> ActionRecord:
        now = self.clock()
        with self._fenced("RecordActionOutcome", fence):
            record = await self.db.run(
                lambda conn: actions.record_action(
                    conn, fence, action, state, external_ref=external_ref, detail=detail, now=now
                )
            )
        self.observer.action_recorded(fence, record)
        return record

    async def release(self, fence: Fence) -> None:
        now = self.clock()
        with self._fenced("Release", fence):
            namespace, _, event_type = await self.db.run(
                lambda conn: claims.release_event(conn, fence, now), transaction=False
            )
        self.wake_claimers({(namespace, event_type): 1})
        self.observer.released([fence])

    async def release_many(self, fences: Sequence[Fence]) -> int:
        now = self.clock()
        released = await self.db.run(lambda conn: claims.release_events(conn, fences, now), transaction=False)
        self.wake_claimers(Counter((ns, t) for ns, _, t in released))
        self.observer.released(fences)
        return len(released)


def _held(results: Sequence[InboxError | None]) -> list[int]:
    return [i for i, result in enumerate(results) if isinstance(result, claims.RowLocked)]


def truncate_error(error: str) -> str:
    """At most 4 KiB of UTF-8, cut on a character boundary, NUL made visible."""
    text = error.replace("\x00", "\\0")
    data = text.encode("utf-8", errors="replace")
    if len(data) <= MAX_ERROR_BYTES:
        return data.decode("utf-8")
    return data[: MAX_ERROR_BYTES - 3].decode("utf-8", errors="ignore") + "..."
