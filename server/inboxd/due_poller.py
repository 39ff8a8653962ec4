"""One database look per server process and interval on behalf of every waiting Claim.

A waiting Claim needs a second chance when a wake-up was lost (another
replica's signal dropped), an event comes due on its own (a delay or a
backoff ends) or a lease expires. Each waiter used to re-run its claim query
every second: 5,000 idle long-polls were 2,000 transactions a second. Now
this poller asks once per interval which kinds of event the waiters want are
due, and wakes only as many matching waiters as there are due events; it runs
only while someone waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import datetime

from inboxd.store.database import Database
from inboxd.store.wakeups import due_kinds
from inboxd.wakeups import WakeBus

log = logging.getLogger(__name__)


class DuePoller:
    def __init__(
        self,
        db: Database,
        bus: WakeBus,
        clock: Callable[[], datetime | None],
        interval: Callable[[], float],
    ) -> None:
        self._db = db
        self._bus = bus
        self._clock = clock
        self._interval = interval
        self._poke = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.looks = 0

    def ensure_running(self) -> None:
        """Called when a waiter registers: the poller runs while anyone waits."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run())

    def poke(self) -> None:
        """Look now (signals may have been lost), or notice that nobody waits any more."""
        self._poke.set()

    async def look(self) -> None:
        """One look, and the wake-ups it calls for."""
        wanted = self._bus.wanted()
        if not wanted:
            return
        now = self._clock()
        self.looks += 1
        kinds = await self._db.run(lambda conn: due_kinds(conn, wanted, now), transaction=False)
        for namespace, event_type, count in kinds:
            self._bus.notify(namespace, event_type, count)

    async def _run(self) -> None:
        while len(self._bus):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._poke.wait(), self._interval())
            self._poke.clear()
            try:
                await self.look()
            except Exception as exc:  # noqa: BLE001 - the database may be down; look again next interval
                log.warning("wake-up poll failed: %s", exc or type(exc).__name__)
