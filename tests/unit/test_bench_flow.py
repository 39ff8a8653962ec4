"""Issue 28's benchmark: the ledger arithmetic (overlaps, rates, who came first) and its rows on the page.

Made-up ledger rows and results in the shape bench/results/*.json store; nothing is measured.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench import flow_ledger as ledger
from bench.phases.flow import DRAIN_NONE, DRAIN_RULES, FAIRNESS, IN_FLIGHT, PLAN, RATE, drain_order, other_rules
from bench.phases.flow_baseline import BASELINE, baseline_statement, number
from bench.record import combined
from bench.report import targets_section
from bench.target_kinds import Target
from bench.targets import targets, verdict
from tests.unit.test_bench_report import figure, results
from tests.unit.test_bench_tracing import window


def test_max_overlap_counts_the_intervals_held_at_one_instant() -> None:
    assert ledger.max_overlap([]) == 0
    assert ledger.max_overlap([(0.0, 1.0), (0.5, 2.0), (0.7, 0.8), (3.0, 4.0)]) == 3
    # One given back at the instant another is handed out: never both held.
    assert ledger.max_overlap([(0.0, 1.0), (1.0, 2.0)]) == 1
    # Still held when the ledger was read: held to the end.
    assert ledger.max_overlap([(0.0, None), (5.0, 6.0)]) == 2


def test_time_above_sums_the_seconds_during_which_more_than_the_limit_were_held() -> None:
    intervals = [(0.0, 10.0), (1.0, 3.0), (2.0, 2.5), (2.25, 4.0)]
    # Above 2 from 2.0 to 3.0 (2.0-2.25: 3 held; 2.25-2.5: 4; 2.5-3.0: 3).
    assert ledger.time_above(intervals, 2) == pytest.approx(1.0)
    assert ledger.time_above(intervals, 4) == 0.0
    assert ledger.time_above([(0.0, None), (1.0, None)], 1) == float("inf")
    assert ledger.stretches_above(intervals, 2) == [1.0]
    # Two stretches: 2 held from 1.0 to 2.0, and from 3.0 to 3.5.
    assert ledger.stretches_above([(0.0, 2.0), (1.0, 4.0), (3.0, 3.5)], 1) == [1.0, 0.5]


def test_the_rate_counts_the_window_from_its_start_up_to_but_not_including_its_end() -> None:
    times = [0.5, 1.0, 1.2, 1.9, 2.0, 2.999, 3.0, 7.0]
    assert ledger.count_in_window(times, 1.0, 2.0) == 5
    assert ledger.rate_in_window(times, 1.0, 2.0) == 2.5
    assert ledger.per_second(times, 1.0, 2.0) == [3, 2]
    assert ledger.rate_in_window(times, 1.0, 0.0) == 0.0


def test_the_noisy_namespaces_events_of_the_claim_that_took_the_quiets_last_count_as_first() -> None:
    rows: list[tuple[str, float, float | None]] = [
        ("noisy", 1.0, 1.1),
        ("quiet", 1.0, 1.1),
        ("noisy", 2.0, 2.1),
        ("quiet", 2.0, 2.1),
        ("noisy", 3.0, 3.1),
    ]
    assert ledger.handed_out_before_last(rows, "noisy", "quiet") == {"noisy_first": 2, "quiet_handed_out": 2}
    first_only = [r for i, r in enumerate(rows) if i != 3]
    assert ledger.handed_out_before_last(first_only, "noisy", "quiet") == {"noisy_first": 1, "quiet_handed_out": 1}
    assert ledger.handed_out_before_last([r for r in rows if r[0] == "noisy"], "noisy", "quiet") == {
        "noisy_first": 3,
        "quiet_handed_out": 0,
    }


def test_a_rule_row_ranks_a_name_above_any_pattern_and_patterns_by_their_literal_characters() -> None:
    name = ledger.rule_row("mailera/eu", max_in_flight=5)
    assert (name["like_pattern"], name["is_pattern"], name["specificity"]) == ("mailera/eu", False, 1_000_010)
    pattern = ledger.rule_row("mailera_x/*", rate=50.0, burst=10)
    assert (pattern["like_pattern"], pattern["is_pattern"], pattern["specificity"]) == ("mailera\\_x/%", True, 10)
    assert (pattern["rate"], pattern["burst"], pattern["max_in_flight"], pattern["weight"]) == (50.0, 10, None, 1)
    with pytest.raises(ValueError, match="max_inflight"):
        ledger.rule_row("a", max_inflight=5)


def test_the_drains_rules_never_govern_the_drained_namespace() -> None:
    from bench.phases.claim import CLAIM_NS
    from inboxd.domain.namespace_patterns import like_matcher

    rules = other_rules(20)
    assert len(rules) == 20 and len({r["pattern"] for r in rules}) == 20
    assert not like_matcher(tuple(r["like_pattern"] for r in rules)).matches(CLAIM_NS)
    # The near misses are near: each matches a namespace one character from the drained one.
    assert like_matcher(tuple(r["like_pattern"] for r in rules)).matches(CLAIM_NS + "-x")


def test_the_kept_baseline_is_the_claim_statement_with_numbered_placeholders() -> None:
    text, names = baseline_statement()
    assert BASELINE.exists() and text.startswith("-- inboxd: event_claim (as at 37c09d5)")
    assert "%(" not in text and "$1" in text and "max_events" in names and "namespaces" in names
    assert number("a = %(x)s AND b = %(y)s AND c = %(x)s AND d LIKE 'x%%'") == (
        "a = $1 AND b = $2 AND c = $1 AND d LIKE 'x%'",
        ("x", "y"),
    )


def flow_results() -> dict[str, Any]:
    """A run whose flow figures all meet their bars."""
    bench = results(0.9)
    bench["config"].update(flow_noisy=2000, flow_namespaces=10_000, flow_in_flight_events=10_000)
    bench["figures"].update(
        {
            FAIRNESS: {"value": 10.0, "unit": "events", "noisy": 2000},
            PLAN: {
                "value": 0.8,
                "namespaces": 10_000,
                "events_per_namespace": 3,
                "generic": {"execution_ms": 0.8, "rows_read": 40, "buffers": 120},
                "custom": {"execution_ms": 0.7},
            },
            IN_FLIGHT: {
                "value": 5.0,
                "max_in_flight": 5,
                "events": 10_000,
                "claims": 10_000,
                "completed": 10_000,
                "seconds": 12.5,
                "timed_out": False,
                "seconds_above_limit": 0.0,
            },
            RATE: {"value": 50.4, "in_window": 1512, "window_s": 30.0, "per_second": [48, 52]},
            DRAIN_NONE: {
                **combined([window(6900.0, "rows/s", 8.0, 6.0, 40.0), window(7100.0, "rows/s", 8.0, 6.0, 40.0)]),
                "order": "ABBA",
            },
            DRAIN_RULES: {
                **combined([window(6600.0, "rows/s", 8.0, 6.0, 40.0), window(6700.0, "rows/s", 8.0, 6.0, 40.0)]),
                "order": "ABBA",
            },
            "flow.claim10.fair": {
                **figure(7000.0, "rows/s", server_s=0.0),
                "windows": [7000.0],
                "order": "ABBA",
                "statement": "A",
            },
            "flow.claim10.before": {
                **figure(7100.0, "rows/s", server_s=0.0),
                "windows": [7100.0],
                "order": "ABBA",
                "statement": "B",
            },
        }
    )
    return bench


def rows(bench: dict[str, Any]) -> list[tuple[Target, str, str]]:
    found = []
    for t in targets(bench):
        if t.issue == "28":
            m = t.measure(bench, None)
            found.append((t, m.shown if m.value is not None else m.missing, verdict(t, m)))
    return found


def test_issue_28s_rows_are_on_the_targets_table_each_met_when_its_figure_meets_its_bar() -> None:
    bench = flow_results()
    section = [line for line in targets_section(bench, None) if line.startswith("| flow control |")]
    assert len(section) == 7
    shown = [(s, met) for _t, s, met in rows(bench)]
    assert shown == [
        ("10 of 2,000 events", "yes"),
        ("0.80 ms (custom plan: 0.70 ms)", "yes"),
        ("40 rows, 120 buffers (of a backlog of 30,000)", "yes"),
        ("5 leases (10,000 claims; 10,000 drained in 12.5 s)", "yes"),
        ("50.4 /s (1,512 in 30 s; each second 48 to 52)", "yes"),
        ("0.95x (6,650 ÷ 7,000 rows/s; windows ABBA: rules 6,600, 6,700, none 6,900, 7,100)", "yes"),
        ("0.99x (7,000 ÷ 7,100 rows/s; windows ABBA: fair 7,000, before 7,100)", "yes"),
    ]


def test_the_drains_alternate_a_b_b_a_and_an_earlier_runs_single_windows_say_so() -> None:
    assert drain_order(2) == [DRAIN_NONE, DRAIN_RULES, DRAIN_RULES, DRAIN_NONE] * 2
    bench = flow_results()
    bench["figures"][DRAIN_NONE] = figure(7000.0, "rows/s", server_s=6.0)
    bench["figures"][DRAIN_RULES] = figure(6000.0, "rows/s", server_s=6.0)
    drain = [(s, met) for t, s, met in rows(bench) if "rules on other namespaces" in t.label]
    assert drain == [("0.86x (6,000 ÷ 7,000 rows/s; one window each)", "**no**")]


def test_a_sixth_lease_a_rate_off_by_more_than_ten_percent_and_a_slow_plan_are_missed() -> None:
    bench = flow_results()
    figs = bench["figures"]
    figs[IN_FLIGHT].update(value=6.0, seconds_above_limit=0.0042, stretches_above_limit=3, longest_above_limit_s=0.002)
    figs[RATE]["value"] = 55.6
    figs[PLAN]["generic"].update(execution_ms=2.5, rows_read=30_000)
    figs[FAIRNESS]["value"] = 2000.0
    met = {t.label.split(":")[-1].strip()[:20]: (s, v) for t, s, v in rows(bench)}
    assert [v for _s, v in met.values()].count("**no**") == 5
    (in_flight,) = [s for t, s, _v in rows(bench) if t.label.startswith("max_in_flight")]
    assert (
        in_flight == "6 leases (10,000 claims; 10,000 drained in 12.5 s, above 5 for 4.200 ms in all over 3 stretches, "
        "the longest 2.000 ms)"
    )
    figs[RATE]["value"] = 45.0
    (rate,) = [v for t, _s, v in rows(bench) if t.label.startswith("rate")]
    assert rate == "yes"


def test_a_figure_not_measured_says_why_and_shows_no_number() -> None:
    bench = results(0.9)
    assert all(s.endswith("had no flow phase (run `make bench`)") for _t, s, _v in rows(bench))
    bench["config"]["flow_noisy"] = 2000
    bench["flow_unmeasured"] = {IN_FLIGHT: "RuntimeError: no server of 4 processes: `--workers` absent"}
    found = rows(bench)
    assert all(v == "not measured" for _t, _s, v in found)
    (in_flight,) = [s for t, s, _v in found if t.label.startswith("max_in_flight")]
    assert in_flight == "not measured: RuntimeError: no server of 4 processes: `--workers` absent"
    (fairness,) = [s for t, s, _v in found if t.label.startswith("a quiet namespace")]
    assert fairness == f"not measured: no `{FAIRNESS}` in this run"
    # The drain without rules failed, so the one with rules never ran: the row says why the first failed.
    bench["flow_unmeasured"][DRAIN_NONE] = "RuntimeError: the load generator failed"
    (drain,) = [s for t, s, _v in rows(bench) if t.label.startswith("Claim 10 -> Complete drain")]
    assert drain == "not measured: RuntimeError: the load generator failed"
    bench["failed_phases"] = {"flow": "OSError: boom"}
    assert all(s.startswith("not measured: ") for _t, s, _v in rows(bench))
    (fairness,) = [s for t, s, _v in rows(bench) if t.label.startswith("a quiet namespace")]
    assert fairness == "not measured: phase flow failed: OSError: boom"


def test_the_flow_section_shows_what_the_ledger_showed_and_names_what_was_not_measured() -> None:
    from bench.report_flow import flow

    assert flow(results(0.9)) == []
    bench = flow_results()
    bench["figures"][RATE]["rate"] = 50.0
    bench["figures"][PLAN]["generic"]["plan"] = "-> Limit  (rows=10 loops=1 time=0.1 ms)"
    bench["figures"][IN_FLIGHT].update(empty_claims=7, seconds_above_limit=0.00025)
    bench["flow_unmeasured"] = {DRAIN_RULES: "RuntimeError: boom"}
    page = "\n".join(flow(bench))
    assert "max_in_flight 5: 10,000 claims of 10,000 events, 7 Claims answered empty" in page
    assert "above the limit for 0.250 ms in all" in page
    assert "each second of the window: 48, 52." in page
    assert "-> Limit  (rows=10 loops=1 time=0.1 ms)" in page
    assert "`flow.drain.rules` not measured: `RuntimeError: boom`" in page
