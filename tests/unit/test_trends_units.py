"""The trends' pure parts: the tally's bounds, and the charts' drawing and words."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from inboxd.console.trends_page import namespace_trends, sparkline
from inboxd.domain.trends import MinuteCounts, NamespaceTrend, minutes_of
from inboxd.domain.vocabulary import (
    AcceptOutcome,
    AcceptResult,
    ClaimToken,
    Disposition,
    EventKey,
    EventState,
    FailResult,
    Fence,
    Namespace,
    NewEvent,
)
from inboxd.observability.trends import TrendTally

NOW = datetime(2026, 12, 2, 1, 0, tzinfo=UTC)


def event(ns: str) -> NewEvent:
    return NewEvent(Namespace(ns), EventKey("k"), "t", b"{}")


def fence(ns: str) -> Fence:
    return Fence(Namespace(ns), EventKey("k"), ClaimToken("c"))


def test_the_tally_counts_new_events_completions_and_dead_letters_by_fail_per_namespace() -> None:
    tally = TrendTally()
    results = [AcceptResult(o, EventState.PENDING, NOW) for o in AcceptOutcome]
    tally.accepted([event("a"), event("a"), event("a")], results)
    tally.completed(fence("a"), Disposition.APPLIED)
    tally.failed(fence("b"), FailResult(EventState.DEAD_LETTERED, None))
    tally.failed(fence("b"), FailResult(EventState.PENDING, NOW))
    assert sorted(tally.take(), key=lambda c: c.namespace) == [
        MinuteCounts("a", accepted=1, completed=1),
        MinuteCounts("b", dead_lettered=1),
    ]
    assert tally.take() == [], "a take starts a fresh tally"


def test_namespaces_beyond_the_cap_are_summed_under_other() -> None:
    tally = TrendTally(max_namespaces=2)
    for ns in ("a", "b", "c", "d"):
        tally.completed(fence(ns), Disposition.APPLIED)
    counts = {c.namespace: c.completed for c in tally.take()}
    assert counts == {"a": 1, "b": 1, "other": 2}


def test_a_failed_write_gives_its_counts_back_for_the_next() -> None:
    tally = TrendTally()
    tally.completed(fence("a"), Disposition.APPLIED)
    taken = tally.take()
    tally.completed(fence("a"), Disposition.APPLIED)
    tally.give_back(taken)
    assert tally.take() == [MinuteCounts("a", completed=2)]


def test_a_chart_leaves_a_gap_where_a_minute_has_no_figure_and_says_its_title() -> None:
    svg = sparkline("age", "Oldest <b>", [1.0, 2.0, None, 4.0])
    assert svg.count(" M") + svg.count('"M') == 2, svg
    assert "<title>Oldest &lt;b&gt;</title>" in svg
    assert 'role="img"' in svg and "style=" not in svg, "the CSP allows no inline style"


def test_a_namespaces_charts_say_their_figures_and_escape_its_name() -> None:
    minutes = minutes_of(NOW, timedelta(minutes=3))
    assert minutes == (NOW - timedelta(minutes=2), NOW - timedelta(minutes=1), NOW)
    trend = NamespaceTrend("<shop>", minutes, (0, 5, 2), (0, 0, 0), (0, 0, 1), (None, 30.0, 90.0))
    html = namespace_trends(trend)
    assert "&lt;shop&gt;" in html and "<shop>" not in html
    assert "7 in all, peak 5/min at 00:59Z, last minute 2" in html
    assert "0 in all, peak 0/min, last minute 0" in html
    assert "now 1m30s, worst 1m30s" in html
