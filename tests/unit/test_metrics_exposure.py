"""What /metrics reveals, and to whom: no address beyond loopback unless said, a bounded set of namespace labels."""

from __future__ import annotations

from datetime import timedelta

import pytest

from inboxd.config.settings import ConfigError, Settings, load_settings, metrics_refusal, serving_refusal
from inboxd.domain.operator_views import NamespaceStats
from inboxd.observability.metrics import OTHER_NAMESPACES, StatsGauges


@pytest.mark.parametrize("listen", ["0.0.0.0:9464", ":9464", "[::]:9464", "10.1.2.3:9464", "metrics.internal:9464"])
def test_metrics_beyond_loopback_are_refused_unless_the_operator_says_so(listen: str) -> None:
    refusal = serving_refusal(load_settings({"INBOXD_METRICS_LISTEN": listen}))
    assert refusal is not None and f"refusing to serve /metrics on {listen}: it has no authentication" in refusal
    said = load_settings({"INBOXD_METRICS_LISTEN": listen, "INBOXD_METRICS_BEYOND_LOOPBACK": "1"})
    assert serving_refusal(said) is None
    assert serving_refusal(load_settings({}, {"metrics_listen": listen, "metrics_beyond_loopback": "1"})) is None


@pytest.mark.parametrize("listen", ["127.0.0.1:9464", "[::1]:0", "localhost:9464"])
def test_metrics_on_loopback_need_no_word(listen: str) -> None:
    assert metrics_refusal(Settings(metrics_listen=listen)) is None


def test_the_namespace_label_cap_is_at_least_one() -> None:
    with pytest.raises(ConfigError, match="INBOXD_METRICS_MAX_NAMESPACES must be at least 1"):
        load_settings({"INBOXD_METRICS_MAX_NAMESPACES": "0"})


def _labels(gauges: StatsGauges) -> dict[str, float]:
    """namespace -> its inboxd_events{state="pending"} value."""
    events = next(m for m in gauges.collect() if m.name == "inboxd_events")
    return {s.labels["namespace"]: s.value for s in events.samples if s.labels["state"] == "pending"}


def test_namespaces_beyond_the_cap_are_summed_under_other() -> None:
    gauges = StatsGauges(max_namespaces=3)
    snapshot = [
        NamespaceStats(f"tenant-{i:04}", pending=i, oldest_claimable_age=timedelta(seconds=i)) for i in range(1000)
    ]
    gauges.update(snapshot)
    labels = _labels(gauges)
    assert labels == {"tenant-0999": 999, "tenant-0998": 998, "tenant-0997": 997, OTHER_NAMESPACES: sum(range(997))}
    oldest = next(m for m in gauges.collect() if m.name == "inboxd_oldest_claimable_age_seconds")
    assert {s.labels["namespace"]: s.value for s in oldest.samples}[OTHER_NAMESPACES] == 996


def test_a_namespace_keeps_its_label_while_it_has_events_and_a_freed_place_goes_to_another() -> None:
    gauges = StatsGauges(max_namespaces=2)
    gauges.update([NamespaceStats("a", pending=1), NamespaceStats("b", pending=2)])
    gauges.update([NamespaceStats("a", pending=1), NamespaceStats("b", pending=2), NamespaceStats("c", pending=50)])
    assert _labels(gauges) == {"a": 1, "b": 2, OTHER_NAMESPACES: 50}
    gauges.update([NamespaceStats("b", pending=2), NamespaceStats("c", pending=50), NamespaceStats("d", pending=9)])
    assert _labels(gauges) == {"b": 2, "c": 50, OTHER_NAMESPACES: 9}


def test_a_namespace_named_other_counts_in_the_other_bucket() -> None:
    gauges = StatsGauges(max_namespaces=5)
    gauges.update([NamespaceStats("other", pending=4), NamespaceStats("a", pending=1)])
    assert _labels(gauges) == {"a": 1, OTHER_NAMESPACES: 4}
