"""One database look per server process and interval on behalf of every waiting Claim.

A waiting Claim needs a second chance when a wake-up was lost (another
replica's signal dropped), an event comes due on its own (a delay or a
backoff ends) or a lease expires. Each waiter used to re-run its claim query
every second: 5,000 idle long-polls were 2,000 transactions a second. Now
this poller asks once per interval which kinds of event the waiters want are
due, and wakes only as many matching waiters as there are due events; it runs
only while someone waits.

Its looks also spare the waiters their own. A worker's long-poll ends and
the worker asks again at once: 5,000 workers waiting 30 s each were 330
claim queries a second (a look when each Claim began and one when it ended).
When the last look found nothing due for a waiter's filter and no wake-up
that filter wants has come since that look began (`nothing_due_for`), the
waiter need not look: anything accepted since would have woken it or spoilt
the finding, and anything coming due by time is the next look's to find.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from inboxd.runtime.wakeups import WaitFilter, WakeBus
from inboxd.store.database import Database
from inboxd.store.wakeups import DUE_CAP, due_kinds

log = logging.getLogger(__name__)

# A finding is trusted while the poller is on schedule: up to one look overdue.
TRUSTED_INTERVALS = 2.0


@dataclass(frozen=True)
class Finding:
    """What one look found nothing due for, and as of what."""

    # The bus's wake-up number when the look began: later wake-ups spoil the finding.
    wake_seq: int
    # time.monotonic() when the look began.
    began: float
    # The clock the look ran with (None: the database's now()).
    as_of: datetime | None
    nothing_due: frozenset[WaitFilter]


class DuePoller:
    def __init__(
        self,
        db: Database,
        bus: WakeBus,
        clock: Callable[[], datetime | None],
        interval: Callable[[], float],
        ignore_stale: Callable[[], bool] = lambda: True,
    ) -> None:
        self._db = db
        self._bus = bus
        self._clock = clock
        self._interval = interval
        # Whether a Claim completes stale keyed events IGNORED: they then block nothing, so they count as due.
        self._ignore_stale = ignore_stale
        self._poke = asyncio.Event()
        # Set by `poke`: the next wake of the loop looks even before the interval is up.
        self._look_now = False
        self._task: asyncio.Task[None] | None = None
        self._finding: Finding | None = None
        # Per filter, since the finding: the wake-up number it was last checked at, and whether it was spoilt.
        self._checked: dict[WaitFilter, tuple[int, bool]] = {}
        self._last_look = float("-inf")
        # Looks run, and waiting Claims' looks spared by a finding (for tests and metrics).
        self.looks = 0
        self.spared = 0

    def ensure_running(self) -> None:
        """Called when a waiter registers: the poller runs while anyone waits."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run())

    def poke(self) -> None:
        """Signals may have been lost: no finding holds any more, and the poller looks now if anyone waits."""
        self._bus.anything_may_have_changed()
        self._finding = None
        self._look_now = True
        self._wake_up()

    def notice_no_waiters(self) -> None:
        """The last waiter left: the poller stops rather than wait out its interval."""
        self._wake_up()

    def _wake_up(self) -> None:
        # Only a running poller: with nobody waiting, the next waiter, finding no finding, looks itself.
        if self._task is not None and not self._task.done():
            self._poke.set()

    def looked_since(self, moment: float) -> bool:
        """Whether a look of the poller's that began at or after `moment` (time.monotonic()) succeeded."""
        return self._finding is not None and self._finding.began >= moment

    def nothing_due_for(self, wait_filter: WaitFilter) -> bool:
        """Whether a waiter with this filter may skip its look (see the module's docstring).

        Ask after registering the waiter: from then on a wake-up it wants wakes it.
        """
        finding = self._finding
        if finding is None or wait_filter not in finding.nothing_due:
            return False
        if time.monotonic() - finding.began > TRUSTED_INTERVALS * self._interval():
            return False  # the poller is behind (the database down, say): look
        # A clock moved by hand (tests, replays) may have made anything due.
        if self._clock() != finding.as_of:
            return False
        # Thousands of waiters share a few filters: each is checked again only after a new wake-up.
        checked_at, spoilt = self._checked.get(wait_filter, (-1, False))
        if not spoilt and checked_at != self._bus.wake_seq:
            spoilt = self._bus.woken_since(wait_filter, finding.wake_seq)
            self._checked[wait_filter] = (self._bus.wake_seq, spoilt)
        return not spoilt

    async def look(self) -> None:
        """One look, the wake-ups it calls for, and what it found nothing due for."""
        wanted = self._bus.wanted()
        if not wanted:
            return
        filters = self._bus.filters()
        wake_seq = self._bus.wake_seq
        began = time.monotonic()
        self._last_look = began
        now = self._clock()
        self.looks += 1
        ignore_stale = self._ignore_stale()
        kinds = await self._db.run(
            lambda conn: due_kinds(conn, wanted, now, ignore_stale=ignore_stale), transaction=False
        )
        for namespace, event_type, count in kinds:
            self._bus.notify(namespace, event_type, count)
        # At the cap the answer is partial (another kind may hide behind it): it proves nothing.
        if sum(count for _, _, count in kinds) < DUE_CAP:
            nothing_due = frozenset(f for f in filters if not any(f.wants(ns, t) for ns, t, _ in kinds))
        else:
            nothing_due = frozenset()
        self._finding = Finding(wake_seq, began, now, nothing_due)
        self._checked = {}
        self._bus.forget_wake_ups_until(wake_seq)

    async def _run(self) -> None:
        if time.monotonic() - self._last_look > self._interval():
            # Idle for longer than an interval: the first waiter looks itself, the poller an interval later.
            self._last_look = time.monotonic()
        while len(self._bus):
            # On the interval's cadence, even across a restart when the last waiter left and another came.
            delay = max(0.0, self._last_look + self._interval() - time.monotonic())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._poke.wait(), delay)
            self._poke.clear()
            if not self._look_now and time.monotonic() < self._last_look + self._interval():
                continue  # woken because the last waiter left: stop, or, if another came since, keep the cadence
            self._look_now = False
            try:
                await self.look()
            except Exception as exc:  # noqa: BLE001 - the database may be down; look again next interval
                log.warning("wake-up poll failed: %s", exc or type(exc).__name__)
