"""The Inbox's Claim path: the long poll, one look within the byte budget, a cancelled Claim handed back.

A base of usecases.inbox.Inbox, which holds the state it reads (declared
here, set there): the Claim path is one room, the Inbox's other use cases
another, and a subclass or a caller still finds every method on the Inbox.
"""

from __future__ import annotations

import abc
import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from inboxd.config.settings import Settings
from inboxd.domain.vocabulary import ClaimBatch, ClaimRequest, Fence, StaleRevisions
from inboxd.observability.transition_observer import InboxObserver
from inboxd.runtime.due_poller import DuePoller
from inboxd.runtime.wakeups import Waiter, WakeBus, WakeUp
from inboxd.store import claim_waits, claims
from inboxd.store.database import Connection, Database

K = TypeVar("K")
V = TypeVar("V")

# The Inbox's logger still: the path moved rooms, what it logs did not.
log = logging.getLogger("inboxd.usecases.inbox")

# The poller looks for due work on behalf of all waiting Claims this often,
# to cover a lost wake-up, a delayed event coming due, or a lease expiring.
FALLBACK_POLL_SECONDS = 1.0
# One Claim's events at most, as the claim statement counts them: under the
# 4 MiB every gRPC client receives by default, with 1 MiB for what the count
# leaves out (action ledgers, a carrying Claim's completion results, framing).
# The rest wait, attempts uncounted: a client's limit never kills one unrun.
CLAIM_ANSWER_BYTES = 3 * 1024 * 1024
# Where each filter's last turn over the namespaces ended, for this many filters (the oldest forgotten first).
TURNS_KEPT = 4096
# How long a Claim that found a limited namespace's lock taken waits for the
# Claim holding it (one claim statement) to commit, before it looks again.
CLAIMER_WAIT = timedelta(seconds=1)
# A look whose walk of the namespaces stopped short of the ring's end looks
# again at once, from where it stopped, up to this many times in a row.
LOOKS_ON = 8


class Claiming(abc.ABC):
    """Claim, for the Inbox: what it reads of the Inbox is declared here."""

    db: Database
    settings: Settings
    clock: Callable[[], datetime | None]
    bus: WakeBus
    observer: InboxObserver
    claim_answer_bytes: int
    _background: set[asyncio.Task[object]]
    _poller: DuePoller
    # Per filter (namespaces, patterns, event types): the namespace after which its next turn starts.
    _turns: dict[tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]], str]
    # Claims a flow-control rule held back in this process, by the rule's pattern (FlowControl.throttled_claims).
    flow_throttled: collections.Counter[str]
    # Namespaces a Claim of this process found at their max_in_flight: a completion there wakes a waiter.
    _at_limit: dict[str, None]
    # Set when the server stops: a waiting Claim answers what it has (nothing) at once rather than
    # holding the stop for its whole wait, and a new one does not wait.
    waits_ended: bool = False

    def end_waits(self) -> None:
        """The server is stopping: every waiting unary Claim answers now (a Work stream drains instead)."""
        self.waits_ended = True
        self.bus.notify_all()

    @abc.abstractmethod
    async def release_many(self, fences: Sequence[Fence]) -> int:
        """Hands the events back, claimable at once (the Inbox's Release of a group); how many were still held."""

    def _ignore_stale(self) -> bool:
        return self.settings.stale_revisions is StaleRevisions.IGNORE

    async def claim(self, request: ClaimRequest) -> ClaimBatch:
        """Claims up to max_events, waiting up to request.wait for the first to arrive.

        A waiting Claim registers before it looks, then sleeps until a
        wake-up or its deadline; the poller looks for due work on behalf of
        all waiters, so an idle waiter costs the database nothing. When the
        poller's last look found nothing due for this filter and no wake-up
        for it came since, the Claim skips its own look (as it does at its
        deadline): being registered, it hears of anything that arrives.
        """
        if not request.wait:
            batch = await self._claim_once(request)
            # A walk stopped short of the ring's end: look on from where it stopped before answering nothing.
            for _ in range(LOOKS_ON):
                if batch.events or not batch.turn.cut_short:
                    break
                batch = await self._claim_once(request)
            return batch
        deadline = asyncio.get_running_loop().time() + request.wait.total_seconds()
        return await self._claim_when_due(
            request.namespaces, request.event_types, request.namespace_patterns,
            lambda held: self._claim_once(request), deadline,
        )  # fmt: skip

    async def _claim_when_due(
        self,
        namespaces: Sequence[str],
        event_types: Sequence[str],
        namespace_patterns: Sequence[str],
        look: Callable[[WakeUp | None], Awaitable[ClaimBatch]],
        deadline: float | None,
    ) -> ClaimBatch:
        """Looks (`look`, given the wake-up it answers) until it claims something or the loop time passes `deadline`.

        The long poll of a waiting Claim, and of a Work stream with credit
        (`deadline` None: until it claims). Registered before its first look,
        so nothing claimable that arrives meanwhile goes unheard.
        """
        loop = asyncio.get_running_loop()
        waiter = self.bus.register(namespaces, event_types, namespace_patterns)
        registered = time.monotonic()
        self._poller.ensure_running()
        held = None
        batch = ClaimBatch([])
        looks_on = 0
        looked = False
        try:
            while True:
                held = waiter.take_wake_up()
                token_due: float | None = None
                if held is not None or looks_on or not self._poller.nothing_due_for(waiter.filter):
                    batch = await look(held)
                    looked = True
                    if batch.events:
                        if batch.full:
                            self._wake_one_more(waiter, batch)
                        return batch
                    self.bus.looked_in_vain(waiter, held)
                    held = None
                    # The walk stopped short: namespaces further round may have due events.
                    looks_on = looks_on + 1 if batch.turn.cut_short and looks_on < LOOKS_ON else 0
                    if looks_on:
                        continue
                    token_due = self._seconds_until(batch.turn.next_token_at)
                else:
                    self._poller.spared += 1
                # A rate held events back: look again when its next token is due, unless woken first.
                timeout = token_due
                if deadline is not None:
                    remaining = deadline - loop.time()
                    if remaining <= 0 or self.waits_ended:
                        if not looked and not self._poller.looked_since(registered):
                            # Nothing answered for the database during this wait (it may be down): an
                            # empty answer must rest on a look, or the answer is UNAVAILABLE.
                            batch = await look(None)
                        return batch
                    timeout = remaining if timeout is None else min(timeout, remaining)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(waiter.woken.wait(), timeout)
                if token_due is not None:
                    looks_on = 1  # the token's look is not spared by the poller's finding
        finally:
            self.bus.unregister(waiter, [(e.namespace, e.event_type) for e in batch.events], held)
            if not self.bus:
                self._poller.notice_no_waiters()

    def _wake_one_more(self, waiter: Waiter, batch: ClaimBatch) -> None:
        """A look that took all it asked for wakes one more waiter of its kind: more may be due.

        A waiter that looked meanwhile may have found nothing only because this
        look held the rows (the claim statement skips locked rows) and gone back
        to sleep with a backlog still due; in a drain no Accept comes to wake it,
        and it would wait for the fallback poll. Bounded: a waiter that then
        looks in vain passes the wake-up on at most MAX_HOPS times.
        """
        last = batch.events[-1]
        self.bus.notify(last.namespace, last.event_type, skip=waiter)

    def _seconds_until(self, moment: datetime | None) -> float | None:
        """How long until `moment` by the Inbox's clock (the wall clock when it has none), at least 1 ms."""
        if moment is None:
            return None
        now = self.clock() or datetime.now(UTC)
        return max(0.001, (moment - now).total_seconds())

    async def _claim_once(self, request: ClaimRequest) -> ClaimBatch:
        now = self.clock()
        max_attempts = self.settings.max_attempts
        ignore_stale = self._ignore_stale()
        budget = self.claim_answer_bytes
        turn_of = (request.namespaces, request.namespace_patterns, request.event_types)
        after = self._turns.get(turn_of, "")

        async def look(conn: Connection) -> ClaimBatch:
            # One statement on an autocommit connection: one round trip, no BEGIN/COMMIT.
            batch = await claims.claim_events(
                conn, request, max_attempts=max_attempts, max_bytes=budget, now=now, ignore_stale=ignore_stale,
                after=after,
            )  # fmt: skip
            if batch.events or not batch.turn.busy:
                return batch
            # Another Claim was counting a limited namespace's slots: slots and events may be left, and nothing
            # would wake this one when that Claim commits. Wait for the commit and look again, once.
            again = await claim_waits.claim_events_when_free(
                conn, request, batch.turn.busy[0], lock_wait=CLAIMER_WAIT, max_attempts=max_attempts,
                max_bytes=budget, now=now, ignore_stale=ignore_stale, after=after,
            )  # fmt: skip
            return _both_looks(batch, again)

        task = asyncio.ensure_future(self.db.run(look, transaction=False))
        try:
            # Shielded: a caller who goes away mid-claim must not leave events
            # claimed by nobody until their leases expire.
            batch = await asyncio.shield(task)
        except asyncio.CancelledError:
            task.add_done_callback(self._release_orphaned_claim)
            raise
        self._turn_ended(turn_of, batch)
        # Each round, not just the Claim's last one: a waiting Claim's empty
        # rounds may still have taken over expired leases or dead-lettered events.
        self.observer.claimed(request.worker_id, batch)
        return batch

    def _turn_ended(self, turn_of: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]], batch: ClaimBatch) -> None:
        """Remembers where the filter's next turn starts, and counts what flow control held back."""
        _remember(self._turns, turn_of, batch.turn.ended_at)
        for rule, reason, namespace in batch.turn.throttled:
            self.flow_throttled[rule] += 1
            if reason == "max_in_flight":
                _remember(self._at_limit, namespace, None)

    def slots_freed(self, namespaces: Iterable[str]) -> None:
        """Events of these namespaces left PROCESSING: a Claim held back by max_in_flight may take one now."""
        for namespace in namespaces:
            if namespace in self._at_limit:
                del self._at_limit[namespace]
                self.bus.notify(namespace, "", 1)

    def _release_orphaned_claim(self, task: asyncio.Future[ClaimBatch]) -> None:
        if task.cancelled() or task.exception() is not None or not task.result().events:
            return
        fences = [Fence(e.namespace, e.event_key, e.claim_token) for e in task.result().events]
        log.info("claim cancelled by its caller after commit; releasing %d events", len(fences))
        self._spawn(self.release_many(fences))

    def _spawn(self, coro: Coroutine[Any, Any, object]) -> None:
        background = asyncio.ensure_future(coro)
        self._background.add(background)
        background.add_done_callback(self._background.discard)


def _both_looks(first: ClaimBatch, again: ClaimBatch) -> ClaimBatch:
    """The second look's answer, with what the first did on the way (events it ended, rules that held back)."""
    return replace(
        again,
        leases_expired=first.leases_expired + again.leases_expired,
        ignored_stale=first.ignored_stale + again.ignored_stale,
        dead_lettered_in=first.dead_lettered_in + again.dead_lettered_in,
        turn=replace(again.turn, throttled=first.turn.throttled + again.turn.throttled),
    )


def _remember(kept: dict[K, V], key: K, value: V) -> None:
    """Keeps `key` as the newest of at most TURNS_KEPT entries, forgetting the oldest (dicts keep insertion order)."""
    kept.pop(key, None)
    if len(kept) >= TURNS_KEPT:
        del kept[next(iter(kept))]
    kept[key] = value
