"""What a server runs for its operators beside the RPCs.

Metrics and the transition log hear the inbox's transitions in every server
process. Some duties run once per inboxd instance, however many server
processes it has (`InstanceDuties`): a periodic task refreshes the health
gauges from the Stats query, the retention loop forgets old COMPLETED
events, the bulk runner carries bulk operations on, and the /metrics
endpoint (INBOXD_METRICS_LISTEN) serves it all. With one server process
they run in it; under `--workers N` in the parent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry

from inboxd.background.bulk_runner import BulkRunner
from inboxd.background.destinations import DestinationsRunner
from inboxd.background.rescuer import rescuer_loop
from inboxd.background.retention import retention_loop
from inboxd.background.trends import ages_loop, tally_loop, write_tally
from inboxd.domain.operator_views import NamespaceStats
from inboxd.observability.destination_gauges import DestinationMetrics
from inboxd.observability.metrics import InstanceMetrics, Metrics, StatsGauges
from inboxd.observability.metrics_http import MetricsEndpoint
from inboxd.observability.transition_log import TransitionLog
from inboxd.observability.transition_observer import Observers
from inboxd.observability.trends import TrendTally
from inboxd.usecases.admin import Operators
from inboxd.usecases.inbox import Inbox

log = logging.getLogger(__name__)

STATS_INTERVAL_SECONDS = 15.0
# A scrape re-reads the gauges unless they are fresher than this.
STATS_FRESH_SECONDS = 5.0
# How long a stopping process tries to write its last minute's trend counts.
STOP_WRITE_SECONDS = 1.0


class StatsRefresh:
    """Reads the Stats query (a scan of the whole table) into the gauges, never twice at once.

    Scrapes arriving while a query runs serve the last figure rather than
    start their own scan; the periodic refresh joins the query in flight. A
    scrape that stops waiting (its timeout) leaves the query running, so the
    next scrape finds it in flight instead of piling another scan on top.
    """

    def __init__(self, read: Callable[[], Awaitable[Sequence[NamespaceStats]]], gauges: StatsGauges) -> None:
        self._read = read
        self._gauges = gauges
        self._running: asyncio.Task[None] | None = None

    async def now(self) -> None:
        """Refreshes the gauges, joining the query in flight if there is one."""
        if self._running is None:
            self._running = asyncio.create_task(self._query())
            self._running.add_done_callback(self._finished)
        await asyncio.shield(self._running)

    async def if_old(self) -> None:
        """For a scrape: refreshes gauges older than STATS_FRESH_SECONDS unless a query is already running."""
        if self._running is not None or time.time() - self._gauges.refreshed_at < STATS_FRESH_SECONDS:
            return
        await self.now()

    async def stop(self) -> None:
        if self._running is not None:
            self._running.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._running

    async def _query(self) -> None:
        self._gauges.update(await self._read())

    def _finished(self, task: asyncio.Task[None]) -> None:
        if self._running is task:
            self._running = None
        # Read the outcome even when every waiter gave up, so it is never reported as unretrieved.
        if not task.cancelled():
            task.exception()


@dataclass
class InstanceDuties:
    """What one inboxd instance runs once: the Stats gauges, retention, /metrics.

    `inbox` gives the database, settings and clock; its observer hears the
    retention passes. `registry` is what /metrics serves.
    """

    inbox: Inbox
    operators: Operators
    metrics: InstanceMetrics
    registry: CollectorRegistry
    # The /metrics port actually bound (INBOXD_METRICS_LISTEN may say :0); None without it.
    metrics_port: int | None = None
    stats: StatsRefresh = field(init=False)
    # Carries bulk operations on, each on one replica at a time (background/bulk_runner.py).
    bulk: BulkRunner = field(init=False)
    # Claims the destinations' events and POSTs them (background/destinations.py).
    destinations: DestinationsRunner = field(init=False)
    _endpoint: MetricsEndpoint | None = None
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.stats = StatsRefresh(self._read_health, self.metrics.stats)
        self.bulk = BulkRunner(self.operators, self.metrics)
        self.destinations = DestinationsRunner(self.operators, DestinationMetrics(self.registry))

    async def _read_health(self) -> Sequence[NamespaceStats]:
        """The Stats snapshot for the health gauges; the flow gauges take theirs from it and the rules."""
        snapshot = await self.operators.stats(None)
        self.metrics.flow.update(snapshot, await self.operators.all_flow_rules())
        # The breakers too, from their rows: every replica reports them, whether it delivers or not.
        if self.destinations.metrics is not None:
            self.destinations.metrics.breakers.update(await self.operators.all_destinations())
        return snapshot

    def _loops(self) -> list[Coroutine[Any, Any, None]]:
        """The background loops that must run once per instance, not once per server process."""
        inbox = self.inbox
        loops = [
            retention_loop(inbox.db.conninfo, inbox.settings, inbox.clock, inbox.observer),
            rescuer_loop(inbox),
            # The trends' ages and their window: one replica at a time, under its own lock.
            ages_loop(self.operators),
            self.bulk.run_forever(),
            self.destinations.run_forever(),
        ]
        # Only /metrics reads the gauges. Their query scans the whole table (in parallel: every core of
        # a small machine) and delayed waiting Claims' wake-ups beside it; without readers it is waste.
        if inbox.settings.metrics_listen:
            loops.append(self._refresh_stats_forever())
        return loops

    async def start(self) -> None:
        self._tasks = [asyncio.create_task(loop) for loop in self._loops()]
        listen = self.inbox.settings.metrics_listen
        if listen:
            self._endpoint = MetricsEndpoint(self.registry, before_scrape=self.stats.if_old)
            self.metrics_port = await self._endpoint.start(listen)
            log.info("metrics on http://%s/metrics", _shown(listen, self.metrics_port))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        if self._endpoint is not None:
            await self._endpoint.stop()
        await self.stats.stop()

    async def _refresh_stats_forever(self) -> None:
        while True:
            try:
                await self.stats.now()
            except Exception as exc:  # noqa: BLE001 - the database may be down; the gauges say how old they are
                log.warning("stats gauges not refreshed: %s", exc or type(exc).__name__)
            await asyncio.sleep(STATS_INTERVAL_SECONDS)


def parent_duties(inbox: Inbox, registry: CollectorRegistry) -> InstanceDuties:
    """The duties of a parent that serves no RPCs itself: `registry` reads its children's counters."""
    metrics = InstanceMetrics(registry, inbox.settings.metrics_max_namespaces)
    inbox.observer = Observers(metrics, TransitionLog())
    return InstanceDuties(inbox, Operators(inbox, inbox.observer), metrics, registry)


@dataclass
class Operations:
    """One server process's metrics and operators' use cases, and the instance duties when it has them."""

    inbox: Inbox
    metrics: Metrics
    operators: Operators
    # None in a child server process under --workers N: the parent runs them.
    duties: InstanceDuties | None = None
    # This process's per-namespace minute counts for the console's trends (every process writes its own).
    trends: TrendTally = field(default_factory=TrendTally)
    _tally_task: asyncio.Task[None] | None = None

    @classmethod
    def for_inbox(cls, inbox: Inbox, *, instance_duties: bool = True) -> Operations:
        """Wires metrics and the transition log into `inbox`; nothing runs until `start`."""
        metrics = Metrics()
        tally = TrendTally(inbox.settings.metrics_max_namespaces)
        if not instance_duties:
            inbox.observer = Observers(metrics, tally, TransitionLog())
            return cls(inbox, metrics, Operators(inbox, inbox.observer), trends=tally)
        instance = InstanceMetrics(metrics.registry, inbox.settings.metrics_max_namespaces)
        inbox.observer = Observers(metrics, instance, tally, TransitionLog())
        operators = Operators(inbox, inbox.observer)
        duties = InstanceDuties(inbox, operators, instance, metrics.registry)
        return cls(inbox, metrics, operators, duties, trends=tally)

    @property
    def metrics_port(self) -> int | None:
        return self.duties.metrics_port if self.duties is not None else None

    async def start(self) -> None:
        self._tally_task = asyncio.create_task(tally_loop(self.inbox, self.trends))
        if self.duties is not None:
            await self.duties.start()

    async def stop(self) -> None:
        if self._tally_task is not None:
            self._tally_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._tally_task
            self._tally_task = None
            # A graceful stop keeps its last minute's counts (a crash loses them: trends, not the ledger).
            try:
                # Bounded: a database that is down must not hold the stop for the pool's acquire timeout.
                async with asyncio.timeout(STOP_WRITE_SECONDS):
                    await write_tally(self.inbox, self.trends)
            except Exception as exc:  # noqa: BLE001 - the database may be gone; stopping goes on
                log.warning("trend counts of the last minute not written at stop: %s", exc or type(exc).__name__)
        if self.duties is not None:
            await self.duties.stop()

    async def refresh_stats(self) -> None:
        """Reads the Stats query into the health gauges now."""
        assert self.duties is not None, "a child server process keeps no gauges"
        await self.duties.stats.now()


def _shown(listen: str, port: int) -> str:
    host = listen.rpartition(":")[0] or "0.0.0.0"
    return f"{host}:{port}"
