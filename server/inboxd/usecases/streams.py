"""Work streams in the use cases: pushes within credit, the leases a stream holds, and their end.

A `WorkSession` is one open Work stream as the Inbox sees it, whatever the
transport: its subscription (a ClaimRequest without max_events or wait),
the credit the worker gave and the events not yet pushed against it, and
the claims it pushed and still holds.

- Pushes go through the Claim path itself (`Claiming._claim_once`: ordering
  keys, stale revisions, the answer's byte budget, dead letters, a claim cut
  off mid-statement handed back) and wait as a long-polling Claim waits
  (`Claiming._claim_when_due`): a waiter on the WakeBus, spared its looks by
  the DuePoller's one look per filter. A stream waits only while it has
  credit, so one without credit never takes a wake-up another could use.
- Fairness across namespaces is the claim statement's, as for a Claim
  (DESIGN, Flow control): each look takes the subscribed namespaces in turn,
  by name, pattern or all, and obeys the flow-control rules.
- The stream is the heartbeat: one statement per period renews every lease
  it holds (`store.streams.renew_held`); an idle stream issues none, and
  runs no timer either (its heartbeat task begins with its first push and
  ends at a beat that finds nothing held: 5,000 idle streams are not 500
  task wake-ups a second).
- The heartbeat needs the worker: keepalive ends the stream of a worker
  whose path went silent within `Settings.silent_peer_bound`
  (serving/keepalive.py). A lease shorter than that bound is renewed no
  further than a lease past the worker's last message on the stream, so a
  silent worker's events are claimable again within a lease however long
  its connection lingers.
- Its end ends what it still holds, in one statement, as an expired lease
  would (`store.streams.end_held`), and wakes whoever may take them. A
  stream the server cut off at the end of its drain's grace instead gives
  back what it holds as Release does, the attempt not counted
  (`WorkSession.release_held`): the worker lost nothing by its own doing.
- Credit is capped: a stream holds, with the credit it has left, at most
  MAX_STREAM_CREDIT events; credit beyond that is dropped (clamped, not
  refused), so a worker that gives 2^32-1 and reads nothing holds at most
  that many, not the backlog.

`WorkStreams` (usecases/live_streams.py) is the Inbox's registry of its
live sessions, and their drain when the server stops.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from datetime import timedelta

from inboxd.domain.vocabulary import (
    ClaimBatch,
    ClaimedEvent,
    ClaimRequest,
    ClaimToken,
    EventKey,
    EventState,
    Fence,
    Namespace,
)
from inboxd.runtime.wakeups import WakeUp
from inboxd.store import streams as store
from inboxd.usecases.stream_inbox import StreamInbox

log = logging.getLogger(__name__)

# The most events one push claims: as many as one Claim may take.
MOST_PER_PUSH = 100
# The most events a stream may hold and be owed (its credit) at once: far
# beyond a worker's concurrency, far short of a backlog (docs/operations.md).
MAX_STREAM_CREDIT = 1000
# A heartbeat every third of the lease, so two may be lost before it ends;
# never less often than this, so a long lease's stream still shows it lives.
HEARTBEAT_CAP = timedelta(seconds=60)


def heartbeat_period(lease: timedelta) -> timedelta:
    """How often a stream with this lease renews the leases it holds."""
    return min(lease / 3, HEARTBEAT_CAP)


@dataclass(frozen=True, slots=True)
class LiveStream:
    """A live Work stream as an operator sees it: who, on what, holding how many events."""

    worker_id: str
    caller: str
    namespaces: tuple[str, ...]
    held: int
    # The SQL LIKE patterns (the token's grants) of a subscription that named no namespace; with neither, every one.
    namespace_patterns: tuple[str, ...] = ()
    # Credit given and not yet used by a push (0 for a worker that stopped).
    credit: int = 0


class WorkSession:
    """One open Work stream: its credit, its pushes, and the claims it holds."""

    def __init__(
        self, inbox: StreamInbox, subscription: ClaimRequest, caller: str, monotonic: Callable[[], float]
    ) -> None:
        self._inbox = inbox
        # What the worker's silence is measured by: WorkStreams.monotonic, which a test moves with its clock.
        self._monotonic = monotonic
        self.subscription = subscription
        self.caller = caller
        # Credit given and not yet used by a push.
        self.credit = 0
        self._has_credit = asyncio.Event()
        self._stopped_pushing = False
        # (namespace, event_key) -> the claim token this stream pushed and still holds.
        self.held: dict[tuple[str, str], ClaimToken] = {}
        # Runs while the stream holds events (see the module's docstring); never again once stopped.
        self._heart: asyncio.Task[None] | None = None
        self._heart_stopped = False
        # Told when the server stops: push no more, end once the worker has settled what it holds.
        self.on_drain: Callable[[], None] = lambda: None
        # Claim statements this stream ran (tests count them: a stream without credit runs none).
        self.looks = 0
        # When the worker's last message came (WorkStreams.monotonic): its last sign of life.
        self._heard = monotonic()

    @property
    def heartbeat(self) -> timedelta:
        return heartbeat_period(self.subscription.lease)

    @property
    def retry_seconds(self) -> float:
        """How long a push that failed (the database down, say) waits before it looks again."""
        return self._inbox.fallback_poll_seconds

    def heard(self) -> None:
        """The worker sent a message on the stream: it was alive then."""
        self._heard = self._monotonic()

    def renewal_lease(self) -> timedelta | None:
        """How far a heartbeat now moves the leases held; None: not at all, the worker has been silent a lease.

        A lease at least the silent-peer bound needs no more: keepalive ends a
        silent worker's stream within that bound, and the end hands its events
        on. A shorter one reaches no further than a lease past the worker's last
        message (both runtimes renew a running handler on the stream every third
        of its lease, so a live one is heard that often).
        """
        lease = self.subscription.lease
        if lease >= self._inbox.settings.silent_peer_bound:
            return lease
        left = lease - timedelta(seconds=self._monotonic() - self._heard)
        return left if left > timedelta(0) else None

    def add_credit(self, count: int) -> None:
        """The worker can take `count` more events (none once it asked for no more pushes).

        Clamped: the credit left and the events held stay within MAX_STREAM_CREDIT.
        """
        count = min(count, MAX_STREAM_CREDIT - self.credit - len(self.held))
        if count <= 0 or self._stopped_pushing:
            return
        self.credit += count
        self._inbox.observer.work_credit(count)
        self._has_credit.set()

    def stop_pushing(self) -> None:
        """The worker stops: no more pushes on this stream, whatever credit it gave or gives.

        Its credit goes at once, so an event it releases from now on is never
        pushed back to it (to be ended, its attempt counted, when it closes).
        A look already running still pushes what it claims: the worker gives
        those back too.
        """
        self._stopped_pushing = True
        self._inbox.observer.work_credit(-self.credit)
        self.credit = 0
        self._has_credit.clear()

    async def next_events(self) -> list[ClaimedEvent]:
        """Waits for credit, then for due events; claims at most the credit (and MOST_PER_PUSH) and holds them."""
        sub = self.subscription
        while True:
            await self._has_credit.wait()
            try:
                batch = await self._inbox._claim_when_due(
                    sub.namespaces, sub.event_types, sub.namespace_patterns, self._look, None
                )
            except _CreditGone:
                continue  # waits for credit again, off the wake-up bus (its wake-up passed on)
            if batch.events:
                break
        # No await from the claim's return to here: what was claimed is held, whatever ends the stream next.
        for event in batch.events:
            self.held[event.namespace, event.event_key] = event.claim_token
        if self._heart is None and not self._heart_stopped:
            self._heart = asyncio.create_task(self._keep_alive())
        if not self._stopped_pushing:  # else its credit went already
            self.credit -= len(batch.events)
            self._inbox.observer.work_credit(-len(batch.events))
        if self.credit <= 0:
            self._has_credit.clear()
        self._inbox.observer.work_pushed(len(batch.events))
        return batch.events

    async def _look(self, woken: WakeUp | None) -> ClaimBatch:
        """One look within the credit; the claim statement takes the subscribed namespaces in turn.

        Raises _CreditGone when the worker stopped while the stream waited: a
        look for 0 events would still run the claim statement at every wake-up.
        """
        if self.credit <= 0:
            raise _CreditGone
        self.looks += 1
        return await self._inbox._claim_once(replace(self.subscription, max_events=min(self.credit, MOST_PER_PUSH)))

    def settled(self, fence: Fence) -> None:
        """A call on the stream ended this claim (or found it not current): the stream no longer holds it."""
        key = (fence.namespace, fence.event_key)
        if self.held.get(key) == fence.claim_token:
            del self.held[key]

    def _fences(self) -> dict[tuple[str, str], Fence]:
        return {key: Fence(Namespace(key[0]), EventKey(key[1]), token) for key, token in self.held.items()}

    def _forget(self, sent: dict[tuple[str, str], Fence], kept: Collection[tuple[str, str]] = ()) -> None:
        """Drops what was sent and not kept, unless the stream holds it under a newer claim since."""
        for key, fence in sent.items():
            if key not in kept and self.held.get(key) == fence.claim_token:
                del self.held[key]

    async def renew(self) -> None:
        """One heartbeat: every lease still held, one statement; claims no longer current drop out."""
        lease = self.renewal_lease()
        if not self.held or lease is None:
            return
        sent = self._fences()
        now = self._inbox.clock()
        kept = await self._inbox.db.run(
            lambda conn: store.renew_held(conn, sent.values(), lease, now), transaction=False
        )
        self._forget(sent, kept)

    @property
    def beating(self) -> bool:
        """Whether the heartbeat runs now (it does while the stream holds events)."""
        return self._heart is not None

    def stop_heartbeat(self) -> None:
        """Before the end: a renewal racing the end over the same rows could deadlock with it."""
        self._heart_stopped = True
        if self._heart is not None:
            self._heart.cancel()
            self._heart = None

    async def _keep_alive(self) -> None:
        period = self.heartbeat.total_seconds()
        while True:
            await asyncio.sleep(period)
            if not self.held:
                self._heart = None  # the next push starts another
                return
            try:
                await self.renew()
            except Exception as exc:  # noqa: BLE001 - the database may be down; the next beat tries again
                log.warning("Work stream heartbeat failed: %s", exc or type(exc).__name__)

    async def end(self) -> int:
        """Ends every claim still held as an expired lease would, at once; returns how many ended."""
        if not self.held:
            return 0
        sent = self._fences()
        inbox = self._inbox
        max_attempts, now = inbox.settings.max_attempts, inbox.clock()
        ended = await inbox.db.run(
            lambda conn: store.end_held(conn, sent.values(), max_attempts=max_attempts, now=now), transaction=False
        )
        self._forget(sent)
        back = Counter((e.namespace, e.event_type) for e in ended if e.state is EventState.PENDING)
        inbox.wake_claimers(back)
        # A keyed event back to PENDING still holds its key; one dead-lettered frees it for the next.
        freed = [(e.namespace, e.event_key) for e in ended if e.ordering_key and e.state is not EventState.PENDING]
        inbox.wake_next_of_keys(freed)
        inbox.observer.work_stream_ended_holding(len(ended))
        inbox.observer.leases_ended_dead([e.namespace for e in ended if e.state is EventState.DEAD_LETTERED])
        if ended:
            log.info(
                "Work stream of %r ended holding %d events: %d back to pending, %d dead-lettered",
                self.subscription.worker_id,
                len(ended),
                sum(back.values()),
                len(ended) - sum(back.values()),
            )
        return len(ended)

    async def release_held(self) -> int:
        """The server's drain is over: gives back every claim still held as Release does (attempt not counted)."""
        if not self.held:
            return 0
        sent = self._fences()
        released = await self._inbox.release_many(list(sent.values()))
        self._forget(sent)
        log.info(
            "Work stream of %r held %d events at the end of the server's drain: %d released, attempts not counted",
            self.subscription.worker_id,
            len(sent),
            released,
        )
        return released

    def live(self) -> LiveStream:
        sub = self.subscription
        return LiveStream(
            sub.worker_id, self.caller, sub.namespaces, len(self.held), sub.namespace_patterns, self.credit
        )


class _CreditGone(Exception):
    """The stream's credit went (the worker sent stop_pushing) while it waited for events."""
