"""Whom a transition wakes: events claimable now, at a later moment, or once their ordering key is free.

Every transition that makes an event claimable tells the waiting Claims that
could take it, here and on the other replicas (`Inbox.wake_claimers`), so no
waiter has to find it at the fallback poll:
- at once, the kinds (namespace, event_type) it made claimable: an Accept of
  events available now, a Release, a Replay, the lease rescuer, a Fail whose
  retry is due now;
- at their moment (`DueWakeUps`), by a timer in the process that made the
  transition: an Accept of a delayed event, a Fail whose retry comes later;
- after the commit, the key's next event (`FreedKeys`): a Complete, a Fail or
  a rescue that ends a keyed event frees its key, and the key's next event,
  of whatever type, is claimable from then on. A keyed event's claim token
  says that it is keyed (`KEYED_TOKEN_PREFIX`, written by the claim
  statement), so a Complete of an unkeyed event, wherever it is served, costs
  no look-up.
Left to the due poller, on its interval: an expired lease, a timer lost with
its process, and more delayed moments than `MAX_TIMERS`.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta

from inboxd.domain.vocabulary import AcceptOutcome, AcceptResult, Completion, NewEvent
from inboxd.store.database import Database
from inboxd.store.wakeups import next_of_keys

log = logging.getLogger(__name__)

# (namespace, event_type) -> how many events of that kind became claimable.
Kinds = Mapping[tuple[str, str], int]
Wake = Callable[[Kinds], None]

# The claim statement (event_claim) begins a keyed event's claim token with this.
KEYED_TOKEN_PREFIX = "k-"
# Distinct moments waited for at once; beyond, a moment is the due poller's to find (within an interval).
MAX_TIMERS = 10_000
# Moments closer than this share one timer: a batch of events delayed alike is one wake-up of their count.
TIMER_GRAIN = 0.005


def keyed_token(claim_token: str) -> bool:
    """Whether the claim is of an event with an ordering key: finishing it frees the key."""
    return claim_token.startswith(KEYED_TOKEN_PREFIX)


class DueWakeUps:
    """Wake-ups held until their events come due (a delay, a backoff), then told as at once."""

    def __init__(self, wake: Wake) -> None:
        self._wake = wake
        # The loop time of each moment waited for -> what comes due then.
        self._moments: dict[float, Counter[tuple[str, str]]] = {}

    def __len__(self) -> int:
        return len(self._moments)

    def after(self, delay: timedelta, namespace: str, event_type: str, count: int = 1) -> None:
        """Wakes for `count` events of this kind once `delay` has passed (now, if it has)."""
        seconds = delay.total_seconds()
        if seconds <= 0:
            self._wake({(namespace, event_type): count})
            return
        loop = asyncio.get_running_loop()
        # Rounded up: a waiter woken a little late finds the event; one woken early looks in vain.
        moment = math.ceil((loop.time() + seconds) / TIMER_GRAIN) * TIMER_GRAIN
        due = self._moments.get(moment)
        if due is None:
            if len(self._moments) >= MAX_TIMERS:
                return
            due = self._moments[moment] = Counter()
            loop.call_at(moment, self._come_due, moment)
        due[namespace, event_type] += count

    def accepted(
        self, events: Sequence[NewEvent], results: Sequence[AcceptResult | None], now: datetime | None
    ) -> None:
        """Wakes for the new events: those available now at once, the delayed ones at their `available_at`.

        A result of None is an event not committed (a later round of its call failed): nobody is woken for it.
        """
        current = now or datetime.now(UTC)
        counts: Counter[tuple[str, str]] = Counter()
        for event, result in zip(events, results, strict=True):
            if result is None or result.outcome is not AcceptOutcome.ACCEPTED:
                continue
            if event.available_at is None or event.available_at <= current:
                counts[event.namespace, event.event_type] += 1
            else:
                self.after(event.available_at - current, event.namespace, event.event_type)
        if counts:
            self._wake(counts)

    def _come_due(self, moment: float) -> None:
        due = self._moments.pop(moment, None)
        if due:
            self._wake(due)


class FreedKeys:
    """Wakes for the next event of each key that finished events held, once their transaction committed."""

    def __init__(
        self, db: Database, wake: Wake, clock: Callable[[], datetime | None], ignore_stale: Callable[[], bool]
    ) -> None:
        self._db = db
        self._wake = wake
        self._clock = clock
        self._ignore_stale = ignore_stale
        self._running: set[asyncio.Task[None]] = set()

    def finished(self, events: Sequence[tuple[str, str]]) -> None:
        """`events`: (namespace, event_key) just completed or dead-lettered; only keyed ones cost a look-up."""
        if not events:
            return
        # In the background: the callers have their answers already; a waiter hears a few ms later.
        task = asyncio.ensure_future(self._wake_next(list(events)))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    def completed(self, completions: Sequence[Completion], results: Sequence[object]) -> None:
        """Completions and their answers: those done (None) of keyed events free their keys."""
        self.finished(
            [
                (c.fence.namespace, c.fence.event_key)
                for c, result in zip(completions, results, strict=True)
                if result is None and keyed_token(c.fence.claim_token)
            ]
        )

    async def _wake_next(self, events: list[tuple[str, str]]) -> None:
        now, ignore_stale = self._clock(), self._ignore_stale()
        try:
            kinds = await self._db.run(
                lambda conn: next_of_keys(conn, events, now, ignore_stale=ignore_stale), transaction=False
            )
        except Exception as exc:  # noqa: BLE001 - the database may be down; the due poller finds the events
            log.warning("could not look up the next events of freed ordering keys: %s", exc or type(exc).__name__)
            return
        if kinds:
            self._wake({(namespace, event_type): count for namespace, event_type, count in kinds})
