"""The edge's metric labels stay bounded: reasons from a fixed set, at most 50 ignored types a route."""

from __future__ import annotations

import uuid

import pytest
from prometheus_client import REGISTRY

from inboxd_edge import edge_metrics


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ("missing signature", "missing"),
        ("missing timestamp", "missing"),
        ("malformed signature header", "malformed"),
        ("timestamp outside tolerance", "timestamp"),
        ("no matching signature", "mismatch"),
        ("clientState does not match", "client_state"),
        ("anything a scheme says \x1b[2J", "other"),
    ],
)
def test_a_signature_failure_is_labelled_from_a_fixed_set_of_reasons(message: str, reason: str) -> None:
    assert edge_metrics.signature_failure_reason(message) == reason


def test_a_route_counts_at_most_fifty_ignored_types_by_name_and_the_rest_as_other() -> None:
    route = f"route-{uuid.uuid4().hex[:8]}"
    for i in range(edge_metrics.MAX_TYPES_PER_ROUTE + 20):
        edge_metrics.count_ignored_type(route, f"type.{i}")
    edge_metrics.count_ignored_type(route, "type.0")

    def count(event_type: str) -> float | None:
        return REGISTRY.get_sample_value("inboxd_edge_ignored_types_total", {"route": route, "type": event_type})

    assert count("type.0") == 2
    assert count(f"type.{edge_metrics.MAX_TYPES_PER_ROUTE - 1}") == 1
    assert count(f"type.{edge_metrics.MAX_TYPES_PER_ROUTE}") is None
    assert count("(other)") == 20
