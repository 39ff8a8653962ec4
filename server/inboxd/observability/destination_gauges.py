"""Destinations' metrics: each destination's breaker (open or not) and its deliveries by outcome.

The breaker gauge is a collector replaced whole at each look of the runner
(background/destinations.py), so a deleted destination's series vanish.
Destinations are few and set by operators, so a label per destination
stays bounded. Every replica reads the same rows: aggregate with max().
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from inboxd.domain.destinations import Destination, DestinationState


class BreakerGauges(Collector):
    def __init__(self) -> None:
        self.states: tuple[tuple[str, bool, int], ...] = ()

    def update(self, destinations: Sequence[Destination]) -> None:
        self.states = tuple((d.name, d.state is DestinationState.PAUSED, d.consecutive_failures) for d in destinations)

    def collect(self) -> Iterator[Metric]:
        open_ = GaugeMetricFamily(
            "inboxd_destination_breaker_open",
            "1 while a destination's circuit breaker is open (its events wait; one is tried at a growing interval).",
            labels=["destination"],
        )
        failures = GaugeMetricFamily(
            "inboxd_destination_consecutive_failures",
            "Failed POSTs in a row to a destination (a 2xx resets it).",
            labels=["destination"],
        )
        for name, is_open, count in self.states:
            open_.add_metric([name], 1.0 if is_open else 0.0)
            failures.add_metric([name], float(count))
        yield open_
        yield failures


class DestinationMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.breakers = BreakerGauges()
        registry.register(self.breakers)
        self.deliveries = Counter(
            "inboxd_destination_deliveries_total",
            "POSTs to destinations, by destination and outcome (completed, retry, dead-lettered, fenced).",
            ["destination", "outcome"],
            registry=registry,
        )
