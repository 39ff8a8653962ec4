"""Retention: how long finished events are remembered, and the loop that enforces it.

- COMPLETED rows are deleted `settings.retention` (INBOXD_RETENTION, default
  7 days) after completion. Until then a repeat of the key is a DUPLICATE;
  after it, the key is forgotten and a repeat is a new event (ACCEPTED).
  That is the dedupe window: it must outlast the longest time a provider
  keeps redelivering.
- Their payloads are dropped earlier, after `settings.payload_retention`
  (INBOXD_PAYLOAD_RETENTION; unset: kept as long as the row). The key, state,
  metadata and action ledger stay, so a late repeat is still a DUPLICATE.
- PENDING, PROCESSING and DEAD_LETTERED rows are never touched.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime

from inboxd.config.settings import Settings
from inboxd.domain.errors import Unavailable
from inboxd.domain.operator_views import RetentionCounts
from inboxd.observability.transition_observer import InboxObserver
from inboxd.store.retention import apply_retention

log = logging.getLogger(__name__)

RETENTION_INTERVAL_SECONDS = 60.0


async def run_retention_pass(
    conninfo: str,
    settings: Settings,
    *,
    now: datetime | None,
    observer: InboxObserver | None = None,
    namespace: str | None = None,
) -> RetentionCounts | None:
    """One pass as of `now` (None: the database's clock); None when another replica is running one."""
    counts = await apply_retention(
        conninfo,
        retention=settings.retention,
        payload_retention=settings.payload_retention,
        now=now,
        namespace=namespace,
    )
    if counts is not None and observer is not None:
        observer.retention_ran(counts)
    return counts


async def retention_loop(
    conninfo: str,
    settings: Settings,
    clock: Callable[[], datetime | None],
    observer: InboxObserver,
    interval: float = RETENTION_INTERVAL_SECONDS,
) -> None:
    """Runs a pass every `interval` seconds until cancelled; a failed pass is logged and retried next time."""
    while True:
        await asyncio.sleep(interval)
        try:
            await run_retention_pass(conninfo, settings, now=clock(), observer=observer)
        except Unavailable as exc:
            log.warning("retention pass skipped: %s", exc)
        except Exception:
            log.exception("retention pass failed")
