"""What a server runs for its operators beside the RPCs.

Metrics and the transition log hear the inbox's transitions; a periodic task
refreshes the health gauges from the Stats query; the retention loop forgets
old COMPLETED events; the /metrics endpoint serves it all when
INBOXD_METRICS_LISTEN is set.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field

from inboxd.metrics import Metrics
from inboxd.metrics_http import MetricsEndpoint
from inboxd.observed_inbox import ObservedInbox
from inboxd.observer import Observers
from inboxd.operators import Operators
from inboxd.retention import retention_loop
from inboxd.transition_log import TransitionLog

log = logging.getLogger(__name__)

STATS_INTERVAL_SECONDS = 15.0
# A scrape re-reads the gauges unless they are fresher than this.
STATS_FRESH_SECONDS = 5.0


@dataclass
class Operations:
    inbox: ObservedInbox
    metrics: Metrics
    operators: Operators
    # The /metrics port actually bound (INBOXD_METRICS_LISTEN may say :0); None without it.
    metrics_port: int | None = None
    _endpoint: MetricsEndpoint | None = None
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    @classmethod
    def for_inbox(cls, inbox: ObservedInbox) -> Operations:
        """Wires metrics and the transition log into `inbox`; nothing runs until `start`."""
        metrics = Metrics()
        inbox.observer = Observers(metrics, TransitionLog())
        return cls(inbox, metrics, Operators(inbox, inbox.observer))

    async def start(self) -> None:
        settings = self.inbox.settings
        self._tasks.append(asyncio.create_task(self._refresh_stats_forever()))
        self._tasks.append(
            asyncio.create_task(retention_loop(self.inbox.db.conninfo, settings, self.inbox.clock, self.inbox.observer))
        )
        if settings.metrics_listen:
            self._endpoint = MetricsEndpoint(self.metrics.registry, before_scrape=self._refresh_stats_if_old)
            self.metrics_port = await self._endpoint.start(settings.metrics_listen)
            log.info("metrics on http://%s/metrics", _shown(settings.metrics_listen, self.metrics_port))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        if self._endpoint is not None:
            await self._endpoint.stop()

    async def refresh_stats(self) -> None:
        """Reads the Stats query into the health gauges."""
        self.metrics.stats.update(await self.operators.stats(None))

    async def _refresh_stats_if_old(self) -> None:
        if time.time() - self.metrics.stats.refreshed_at >= STATS_FRESH_SECONDS:
            await self.refresh_stats()

    async def _refresh_stats_forever(self) -> None:
        while True:
            try:
                await self.refresh_stats()
            except Exception as exc:  # noqa: BLE001 - the database may be down; the gauges say how old they are
                log.warning("stats gauges not refreshed: %s", exc or type(exc).__name__)
            await asyncio.sleep(STATS_INTERVAL_SECONDS)


def _shown(listen: str, port: int) -> str:
    host = listen.rpartition(":")[0] or "0.0.0.0"
    return f"{host}:{port}"
