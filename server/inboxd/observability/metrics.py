"""Prometheus metrics, named inboxd_*: counters of transitions, RPC latency, and the inbox's health.

Each server owns a `Metrics` with its own CollectorRegistry, so several
servers in one process (the tests run a few) never clash. Counters move as
transitions commit (a `Metrics` is an InboxObserver). `InstanceMetrics` is
what one inboxd instance reports once, however many server processes it
runs: retention's counters and the health gauges (events per state, oldest
claimable age, dead letters, unresolved actions), which come from the Stats
query, refreshed periodically. Those gauges describe the whole database, so
every replica reports the same values: aggregate them with max(), not sum().

Under `--workers N` each server process counts into prometheus_client's
multiprocess files (PROMETHEUS_MULTIPROC_DIR, set by the parent before the
child starts) and the parent serves them all through `multiprocess_registry`.
"""

from __future__ import annotations

import enum
import time
from collections import Counter as CountOf
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from inboxd.domain.operator_views import NamespaceStats, RetentionCounts
from inboxd.domain.vocabulary import (
    AcceptOutcome,
    AcceptResult,
    ActionRecord,
    ActionState,
    ClaimBatch,
    Disposition,
    EventState,
    FailResult,
    Fence,
    NewEvent,
)
from inboxd.observability.build_info import BuildInfo
from inboxd.observability.flow_gauges import FlowGauges
from inboxd.observability.transition_observer import InboxObserver

# Up to a minute: a long-polling Claim may wait 60 s by design.
RPC_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


# The namespace label of the namespaces beyond the cap, summed (a namespace named "other" counts in it too).
OTHER_NAMESPACES = "other"


class StatsGauges(Collector):
    """The health gauges, from the latest Stats snapshot (replaced whole, so vanished namespaces vanish).

    Namespaces name tenants, and any accept caller can mint new ones: at most
    `max_namespaces` of them get a label of their own, the rest are summed
    under "other", so traffic cannot grow the series without bound. A
    namespace keeps its label while it has events (series stay put); freed
    places go to the namespaces with the most events.
    """

    def __init__(self, max_namespaces: int = 100) -> None:
        self.max_namespaces = max_namespaces
        self.snapshot: Sequence[NamespaceStats] = ()
        # time.time() of the snapshot; 0 before the first.
        self.refreshed_at = 0.0
        # The namespaces with a label of their own, in the order they got it.
        self._labelled: dict[str, None] = {}

    def update(self, snapshot: Sequence[NamespaceStats]) -> None:
        self.snapshot = self._capped(snapshot)
        self.refreshed_at = time.time()

    def _capped(self, snapshot: Sequence[NamespaceStats]) -> tuple[NamespaceStats, ...]:
        by_name = {s.namespace: s for s in snapshot if s.namespace != OTHER_NAMESPACES}
        labelled = {ns: None for ns in self._labelled if ns in by_name}
        room = self.max_namespaces - len(labelled)
        if room > 0 and len(by_name) > len(labelled):
            newcomers = sorted((s for ns, s in by_name.items() if ns not in labelled), key=most_events_first)
            labelled.update((s.namespace, None) for s in newcomers[:room])
        self._labelled = labelled
        rest = [s for s in snapshot if s.namespace not in labelled]
        kept = tuple(by_name[ns] for ns in labelled)
        return kept + ((_summed(rest),) if rest else ())

    def collect(self) -> Iterator[Metric]:
        events = GaugeMetricFamily("inboxd_events", "Events per namespace and state.", labels=["namespace", "state"])
        oldest = GaugeMetricFamily(
            "inboxd_oldest_claimable_age_seconds",
            "Age of the oldest PENDING event claimable now, from its available_at; 0 when none is waiting.",
            labels=["namespace"],
        )
        dead = GaugeMetricFamily(
            "inboxd_dead_letters", "DEAD_LETTERED events awaiting an operator.", labels=["namespace"]
        )
        unresolved = GaugeMetricFamily(
            "inboxd_unresolved_actions",
            "Actions in UNKNOWN, plus actions INTENDED for longer than INBOXD_ACTION_STALE_AFTER.",
            labels=["namespace"],
        )
        blocked = GaugeMetricFamily(
            "inboxd_blocked_ordering_keys",
            "Ordering keys whose claimable events wait behind another event of their key.",
            labels=["namespace"],
        )
        blocked_age = GaugeMetricFamily(
            "inboxd_oldest_blocked_age_seconds",
            "How long the oldest event waiting behind another of its ordering key has waited; 0 when none.",
            labels=["namespace"],
        )
        for s in self.snapshot:
            for state, count in (
                (EventState.PENDING, s.pending),
                (EventState.PROCESSING, s.processing),
                (EventState.COMPLETED, s.completed),
                (EventState.DEAD_LETTERED, s.dead_lettered),
            ):
                events.add_metric([s.namespace, state.value], count)
            age = s.oldest_claimable_age.total_seconds() if s.oldest_claimable_age is not None else 0.0
            oldest.add_metric([s.namespace], age)
            dead.add_metric([s.namespace], s.dead_lettered)
            unresolved.add_metric([s.namespace], s.unresolved_actions)
            blocked.add_metric([s.namespace], s.blocked_ordering_keys)
            waited = s.oldest_blocked_age.total_seconds() if s.oldest_blocked_age is not None else 0.0
            blocked_age.add_metric([s.namespace], waited)
        refreshed = GaugeMetricFamily(
            "inboxd_stats_refreshed_timestamp_seconds", "When the gauges above were last read from the database."
        )
        refreshed.add_metric([], self.refreshed_at)
        yield from (events, oldest, dead, unresolved, blocked, blocked_age, refreshed)


def most_events_first(s: NamespaceStats) -> tuple[int, str]:
    """A sort key: the namespaces with the most events first (the metrics' labels, the console's trends)."""
    return (-(s.pending + s.processing + s.completed + s.dead_lettered), s.namespace)


def _summed(namespaces: Sequence[NamespaceStats]) -> NamespaceStats:
    """Several namespaces as one: counts add up, the oldest age is the oldest of theirs."""
    claimable = [s.oldest_claimable_age for s in namespaces if s.oldest_claimable_age is not None]
    blocked = [s.oldest_blocked_age for s in namespaces if s.oldest_blocked_age is not None]
    return NamespaceStats(
        namespace=OTHER_NAMESPACES,
        pending=sum(s.pending for s in namespaces),
        processing=sum(s.processing for s in namespaces),
        completed=sum(s.completed for s in namespaces),
        dead_lettered=sum(s.dead_lettered for s in namespaces),
        oldest_claimable_age=max(claimable) if claimable else None,
        unresolved_actions=sum(s.unresolved_actions for s in namespaces),
        blocked_ordering_keys=sum(s.blocked_ordering_keys for s in namespaces),
        oldest_blocked_age=max(blocked) if blocked else None,
    )


class Metrics(InboxObserver):
    """The metrics of one server process."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.accepts = Counter("inboxd_accepts_total", "Accepted events by outcome.", ["outcome"], registry=r)
        self.claims = Counter("inboxd_claims_total", "Events leased to workers by Claim.", registry=r)
        self.subscription_copies = Counter(
            "inboxd_subscription_copies_total", "Subscriptions' copies inserted with their originals.", registry=r
        )
        self.completions = Counter(
            "inboxd_completions_total", "Completions answered OK, by disposition.", ["disposition"], registry=r
        )
        self.failures = Counter(
            "inboxd_failures_total", "Fail calls by result: retry or dead_lettered.", ["result"], registry=r
        )
        self.releases = Counter("inboxd_releases_total", "Claims released without counting the attempt.", registry=r)
        self.lease_expiries = Counter(
            "inboxd_lease_expiries_total", "Expired leases taken over by a later Claim.", registry=r
        )
        self.attempts_exhausted = Counter(
            "inboxd_attempts_exhausted_total", "Events dead-lettered by Claim: no attempts left.", registry=r
        )
        self.stale_revisions_ignored = Counter(
            "inboxd_stale_revisions_ignored_total",
            "Events completed IGNORED at claim time: their revision was at or below their ordering key's applied one.",
            registry=r,
        )
        self.flow_throttled = Counter(
            "inboxd_flow_throttled_claims_total",
            "Claims that a flow-control rule held back in a namespace, by the rule and why (rate, max_in_flight).",
            ["rule", "reason"],
            registry=r,
        )
        self.stale_claims = Counter(
            "inboxd_stale_claims_rejected_total",
            "Fenced calls refused ABORTED: their claim was not current.",
            ["call"],
            registry=r,
        )
        self.actions = Counter(
            "inboxd_actions_recorded_total", "Action intents and outcomes recorded, by state.", ["state"], registry=r
        )
        self.replays = Counter(
            "inboxd_replays_total", "Operator replays by the state before.", ["state_before"], registry=r
        )
        self.rpc_duration = Histogram(
            "inboxd_rpc_duration_seconds", "RPC latency by method and status code.", ["method", "code"],
            buckets=RPC_BUCKETS, registry=r,
        )  # fmt: skip
        # Bounded by the streams' windows (INBOXD_ACCEPT_STREAM_WINDOW each): a full window means a slow commit.
        self.accept_stream_items = Gauge(
            "inboxd_accept_stream_items_held",
            "AcceptStream items read and not yet answered, over all open streams.",
            multiprocess_mode="livesum",
            registry=r,
        )
        self.work_streams = Gauge(
            "inboxd_work_streams_open", "Work streams open.", multiprocess_mode="livesum", registry=r
        )
        self.work_credit_outstanding = Gauge(
            "inboxd_work_credit_outstanding",
            "Credit Work streams gave and no push used yet, over all open streams.",
            multiprocess_mode="livesum",
            registry=r,
        )
        self.work_pushed_events = Counter(
            "inboxd_work_events_pushed_total", "Events pushed on Work streams (each also a claim).", registry=r
        )
        self.work_streams_ended_holding = Counter(
            "inboxd_work_streams_ended_holding_total", "Work streams that ended holding claims.", registry=r
        )
        self.work_events_ended = Counter(
            "inboxd_work_stream_events_ended_total",
            "Claims ended by the end of the Work stream that held them (PENDING or DEAD_LETTERED at once).",
            registry=r,
        )
        # Label lookups cost a lock and a tuple per call: the hot paths keep their children.
        self._rpc_timers: dict[tuple[str, str], Any] = {}
        self._accept_counters = {outcome: self.accepts.labels(outcome.value) for outcome in AcceptOutcome}
        # Known label values start at 0, so rate() sees the first increment.
        for outcome in AcceptOutcome:
            self.accepts.labels(outcome.value)
        for disposition in Disposition:
            self.completions.labels(disposition.value)
        for result in ("retry", "dead_lettered"):
            self.failures.labels(result)
        for state in ActionState:
            self.actions.labels(state.value)

    def observe_rpc(self, method: str, code: enum.Enum, seconds: float) -> None:
        """The handler's callback: one RPC answered with `code` after `seconds`."""
        key = (method, code.name)
        timer = self._rpc_timers.get(key)
        if timer is None:
            timer = self._rpc_timers[key] = self.rpc_duration.labels(method, code.name)
        timer.observe(seconds)

    # -- InboxObserver --

    def accepted(self, events: Sequence[NewEvent], results: Sequence[AcceptResult]) -> None:
        for outcome, count in CountOf(r.outcome for r in results).items():
            self._accept_counters[outcome].inc(count)

    def copied(self, copies: Sequence[NewEvent]) -> None:
        self.subscription_copies.inc(len(copies))

    def accept_stream_held(self, change: int) -> None:
        self.accept_stream_items.inc(change)

    def work_streams_open(self, change: int) -> None:
        self.work_streams.inc(change)

    def work_credit(self, change: int) -> None:
        self.work_credit_outstanding.inc(change)

    def work_pushed(self, count: int) -> None:
        self.work_pushed_events.inc(count)

    def work_stream_ended_holding(self, events: int) -> None:
        if events:
            self.work_streams_ended_holding.inc()
            self.work_events_ended.inc(events)

    def claimed(self, worker_id: str, batch: ClaimBatch) -> None:
        self.claims.inc(len(batch.events))
        self.lease_expiries.inc(batch.leases_expired)
        self.attempts_exhausted.inc(batch.dead_lettered)
        self.stale_revisions_ignored.inc(batch.ignored_stale)
        for rule, reason, _namespace in batch.turn.throttled:
            self.flow_throttled.labels(rule, reason).inc()

    def completed(self, fence: Fence, disposition: Disposition) -> None:
        self.completions.labels(disposition.value).inc()

    def failed(self, fence: Fence, result: FailResult) -> None:
        self.failures.labels("dead_lettered" if result.state is EventState.DEAD_LETTERED else "retry").inc()

    def released(self, fences: Sequence[Fence]) -> None:
        self.releases.inc(len(fences))

    def action_recorded(self, fence: Fence, record: ActionRecord) -> None:
        self.actions.labels(record.state.value).inc()

    def stale_claim_rejected(self, call: str, fence: Fence) -> None:
        self.stale_claims.labels(call).inc()

    def replayed(self, namespace: str, event_key: str, state_before: EventState, actor: str) -> None:
        self.replays.labels(state_before.value).inc()


class InstanceMetrics(InboxObserver):
    """Retention's counters, the health gauges and the build info: reported once per inboxd instance."""

    def __init__(self, registry: CollectorRegistry, max_namespaces: int = 100) -> None:
        self.rows_deleted = Counter(
            "inboxd_retention_rows_deleted_total", "COMPLETED rows deleted by retention.", registry=registry
        )
        self.payloads_dropped = Counter(
            "inboxd_retention_payloads_dropped_total",
            "Payloads of COMPLETED rows dropped by retention.",
            registry=registry,
        )
        self.stats = StatsGauges(max_namespaces)
        registry.register(self.stats)
        # Refreshed with the Stats gauges, from the same snapshot (background/duties.py).
        self.flow = FlowGauges()
        registry.register(self.flow)
        registry.register(BuildInfo())
        # The bulk runner's (background/bulk_runner.py): one replica carries each operation.
        self.bulk_running = Gauge(
            "inboxd_bulk_operations_running",
            "Bulk operations this instance is carrying on.",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.bulk_changed = Counter(
            "inboxd_bulk_events_changed_total",
            "Events bulk operations changed, by action.",
            ["action"],
            registry=registry,
        )

    def retention_ran(self, counts: RetentionCounts) -> None:
        self.rows_deleted.inc(counts.rows_deleted)
        self.payloads_dropped.inc(counts.payloads_dropped)


def multiprocess_registry(folder: Path) -> CollectorRegistry:
    """A registry that reads the counters every server process wrote under `folder` (live or dead)."""
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(folder))  # type: ignore[no-untyped-call]
    return registry
