"""Issue 30's benchmark: the rate from audit times, the Claim windows, and the rows on the page.

Made-up audit times and results in the shape bench/results/*.json store; nothing is measured.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.phases.bulk import CHANGED, CLAIM_DURING, CLAIM_IDLE, RATE, Claims, audit_rate, claim_figure
from bench.report import targets_section
from bench.report_bulk import bulk
from bench.targets import targets, verdict
from tests.unit.test_bench_report import results


def test_the_audit_rate_counts_every_chunk_but_the_last_over_the_span_from_the_first_to_the_last() -> None:
    # Four chunks of 500, a quarter second apart: three chunks' worth in 0.75 s.
    times = [t for t in (10.0, 10.25, 10.5, 10.75) for _ in range(500)]
    assert audit_rate(times) == pytest.approx(2000.0)
    assert audit_rate([]) == 0.0
    # One chunk has no span to measure.
    assert audit_rate([3.0] * 500) == 0.0


def test_a_claim_window_holds_the_claims_begun_in_it_and_its_p99_is_the_figure() -> None:
    claims = Claims(calls=[(0.5, 0.001, False), (1.0, 0.002, False), (1.5, 0.004, True), (2.0, 0.1, False)])
    inside = claims.window(1.0, 2.0)
    assert [c[0] for c in inside] == [1.0, 1.5]
    fig = claim_figure(inside, 1.0)
    assert (fig["ops"], fig["calls_per_s"], fig["empty_claims"], fig["unit"]) == (2, 2.0, 1, "ms")
    assert fig["value"] == fig["p99_ms"] and 2.0 <= fig["p99_ms"] <= 4.0
    assert claim_figure([], 0.0)["calls_per_s"] == 0.0


def claim(p99: float, p50: float, ops: int) -> dict[str, Any]:
    return {"value": p99, "unit": "ms", "ops": ops, "calls_per_s": ops / 8, "p50_ms": p50, "p90_ms": p50 * 2,
            "p99_ms": p99, "max_ms": p99 * 2, "empty_claims": 0, "errors": 0,
            "cpu": {"seconds": 8.0, "used": {"server": 4.0, "postgres": 2.0}}}  # fmt: skip


def bulk_results() -> dict[str, Any]:
    """A run whose bulk figures all meet their bars."""
    bench = results(0.9)
    bench["config"].update(bulk_events=50_000, bulk_rate=2000.0, bulk_claimers=8, bulk_claim_backlog=300_000)
    bench["figures"].update(
        {
            RATE: {
                "value": 1985.0,
                "unit": "events/s",
                "rate": 2000.0,
                "done": 50_000,
                "seconds": 25.19,
                "audit_rate": 2001.0,
                "per_second": [1500, 2000, 2000, 1999, 500],
                "due_spread_s": 25.0,
                "first_chunk_after_s": 1.25,
            },
            CHANGED: {
                "value": 50_000.0,
                "unit": "events",
                "audit_rows": 50_000,
                "distinct_events": 50_000,
                "matched": 50_000,
                "done": 50_000,
                "skipped": 0,
                "pending_replayed": 50_000,
            },
            CLAIM_IDLE: claim(6.0, 2.0, 8000),
            CLAIM_DURING: claim(9.0, 2.5, 20000),
        }
    )
    return bench


def rows(bench: dict[str, Any]) -> list[tuple[str, str]]:
    found = []
    for t in targets(bench):
        if t.issue == "30":
            m = t.measure(bench, None)
            found.append((m.shown if m.value is not None else m.missing, verdict(t, m)))
    return found


def test_issue_30s_rows_are_on_the_targets_table_each_met_when_its_figure_meets_its_bar() -> None:
    bench = bulk_results()
    assert len([line for line in targets_section(bench, None) if line.startswith("| bulk |")]) == 3
    assert rows(bench) == [
        (
            "1,985 /s (50,000 in 25.2 s, started to ended; between the first and the last chunk's audit rows "
            "2,001 /s; each whole second 1,999 to 2,000)",
            "yes",
        ),
        (
            "50,000 events in 50,000 audit rows (0 changed twice); the operation says done 50,000, skipped 0 of "
            "50,000 matched; 50,000 now PENDING and marked replayed",
            "yes",
        ),
        ("1.50x (p99 9.00 ms during, 20,000 Claims, ÷ 6.00 ms idle, 8,000 Claims; p50 2.50 ÷ 2.00 ms)", "yes"),
    ]


def test_a_rate_off_by_more_than_15_percent_an_event_changed_twice_and_a_doubled_p99_are_missed() -> None:
    bench = bulk_results()
    figs = bench["figures"]
    figs[RATE]["value"] = 1690.0
    figs[CHANGED].update(audit_rows=50_001)
    figs[CLAIM_DURING].update(p99_ms=12.5)
    assert [met for _shown, met in rows(bench)] == ["**no**"] * 3
    assert "(1 changed twice)" in rows(bench)[1][0]
    figs[RATE]["value"] = 2290.0
    figs[CHANGED].update(audit_rows=50_000, value=49_999.0, distinct_events=49_999)
    assert [met for _shown, met in rows(bench)][:2] == ["yes", "**no**"]
    # The operation counting more than the audit bears out is not "each once" either.
    figs[CHANGED].update(value=50_000.0, distinct_events=50_000, audit_rows=50_000, done=50_001)
    assert rows(bench)[1][1] == "**no**"


def test_a_figure_not_measured_says_why_and_shows_no_number() -> None:
    bench = results(0.9)
    assert all(s.endswith("had no bulk phase (run `make bench`)") for s, _v in rows(bench))
    bench["config"]["bulk_events"] = 50_000
    bench["bulk_unmeasured"] = {CLAIM_IDLE: "RuntimeError: the claimers' backlog ran out"}
    shown = rows(bench)
    assert all(v == "not measured" for _s, v in shown)
    assert shown[2][0] == "not measured: RuntimeError: the claimers' backlog ran out"
    assert shown[0][0] == f"not measured: no `{RATE}` in this run"
    bench["failed_phases"] = {"bulk": "OSError: boom"}
    assert rows(bench)[0][0] == "not measured: phase bulk failed: OSError: boom"


def test_the_bulk_section_shows_the_audit_seconds_and_both_claim_windows() -> None:
    assert bulk(results(0.9)) == []
    bench = bulk_results()
    bench["bulk_unmeasured"] = {"bulk.other": "RuntimeError: boom"}
    page = "\n".join(bulk(bench))
    assert "each second from the first chunk (audit rows): 1,500, 2,000, 2,000, 1,999, 500" in page
    assert "come due over 25.0 s" in page
    assert "first chunk's rows are 1.25 s after the operation's start" in page
    assert "| idle | 8,000 | 1,000 | 2.00 ms | 4.00 ms | 6.00 ms | 12.00 ms | server 50%, postgres 25% |" in page
    assert "| during the replay | 20,000 |" in page
    assert "no raw-PostgreSQL baseline for the rate" in page
    assert "`bulk.other` not measured: `RuntimeError: boom`" in page
