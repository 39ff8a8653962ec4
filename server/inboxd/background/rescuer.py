"""The lease rescuer: expired leases go back to work even when nobody is claiming.

A Claim takes over an expired lease on its own, but only in a namespace
someone claims. Without the rescuer an event whose worker died stays
PROCESSING in Stats and the CLI until then. Every `settings.rescue_interval`
(INBOXD_RESCUE_INTERVAL, default 15 s) one replica at a time moves events
whose lease expired more than `settings.rescue_grace` ago (INBOXD_RESCUE_GRACE,
default 30 s) back to PENDING, or to DEAD_LETTERED when their attempts are
spent; the old claim ends with outcome 'expired' and its token is refused
from then on. So an expired lease is back within a minute of its expiry.
The grace leaves a worker whose renewal is merely late its lease.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from datetime import datetime

from inboxd.domain.errors import Unavailable
from inboxd.domain.vocabulary import EventState
from inboxd.store.rescue import Rescued, rescue_expired_leases
from inboxd.usecases.inbox import Inbox

log = logging.getLogger(__name__)


async def run_rescue_pass(inbox: Inbox, *, now: datetime | None, namespace: str | None = None) -> Rescued | None:
    """One pass as of `now` (None: the database's clock); None when another replica is running one."""
    settings = inbox.settings
    rescued = await rescue_expired_leases(
        inbox.db.conninfo,
        grace=settings.rescue_grace,
        max_attempts=settings.max_attempts,
        now=now,
        namespace=namespace,
    )
    if rescued:
        back = Counter((ns, t) for ns, t, state in rescued if state is EventState.PENDING)
        log.info(
            "lease rescuer: %d expired leases back to pending, %d dead-lettered",
            sum(back.values()),
            len(rescued) - sum(back.values()),
        )
        # Here and on every replica (under --workers this is the parent, which only sends signals).
        inbox.wake_claimers(back)
        # A keyed event rescued back to PENDING still holds its key; one dead-lettered frees it.
        inbox.wake_next_of_keys(rescued.freed_keys)
        inbox.observer.leases_ended_dead([ns for ns, _, state in rescued if state is EventState.DEAD_LETTERED])
    return rescued


async def rescuer_loop(inbox: Inbox) -> None:
    """Runs a pass every rescue interval until cancelled; a failed pass is logged and retried next time."""
    interval = inbox.settings.rescue_interval.total_seconds()
    if interval <= 0:
        log.info("lease rescuer off (INBOXD_RESCUE_INTERVAL=0)")
        return
    while True:
        await asyncio.sleep(interval)
        try:
            await run_rescue_pass(inbox, now=inbox.clock())
        except Unavailable as exc:
            log.warning("lease rescue skipped: %s", exc)
        except Exception:
            log.exception("lease rescue failed")
