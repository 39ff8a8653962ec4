"""Flow control's gauges: paused namespaces, and per rule its events in flight and its max_in_flight.

Read with the health gauges (metrics.StatsGauges), from the same Stats
snapshot, so they describe the whole database as those do: every replica
reports the same values (aggregate with max(), not sum()). Rules are few
and set by operators, so a label per rule stays bounded. The throttled
claims are a counter of each server process (inboxd_flow_throttled_claims_total).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from inboxd.domain.flow_rules import FlowRule
from inboxd.domain.operator_views import NamespaceStats


class FlowGauges(Collector):
    """The latest snapshot's figures, replaced whole: a removed rule's series vanish."""

    def __init__(self) -> None:
        self.paused_namespaces = 0
        # (pattern, its max_in_flight or None, PROCESSING events over the namespaces it governs)
        self.rules: tuple[tuple[str, int | None, int], ...] = ()

    def update(self, snapshot: Sequence[NamespaceStats], rules: Sequence[FlowRule]) -> None:
        # Open events under a paused rule: the namespaces whose age grows because nobody may claim them.
        self.paused_namespaces = sum(1 for s in snapshot if s.paused and s.pending + s.processing > 0)
        in_flight = Counter[str]()
        for s in snapshot:
            if s.flow_rule:
                in_flight[s.flow_rule] += s.processing
        self.rules = tuple((r.pattern, r.max_in_flight, in_flight[r.pattern]) for r in rules)

    def collect(self) -> Iterator[Metric]:
        paused = GaugeMetricFamily(
            "inboxd_flow_paused_namespaces",
            "Namespaces with open events under a paused flow-control rule: accepted, claimed by no one.",
        )
        paused.add_metric([], self.paused_namespaces)
        in_flight = GaugeMetricFamily(
            "inboxd_flow_in_flight",
            "PROCESSING events of the namespaces a flow-control rule governs, summed over them"
            " (an expired lease counts until taken over or rescued).",
            labels=["rule"],
        )
        limit = GaugeMetricFamily(
            "inboxd_flow_max_in_flight",
            "A flow-control rule's max_in_flight, which binds each namespace it governs separately.",
            labels=["rule"],
        )
        for pattern, max_in_flight, leased in self.rules:
            in_flight.add_metric([pattern], leased)
            if max_in_flight is not None:
                limit.add_metric([pattern], max_in_flight)
        yield from (paused, in_flight, limit)
