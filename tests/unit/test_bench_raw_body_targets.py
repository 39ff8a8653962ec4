"""Issue 29's rows on docs/benchmarks.md: each a figure measured, or why it is not, with its bar.

The results are made up in the shape bench/results/*.json store; nothing is measured.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.raw_body_targets import BEFORE, load_before, raw_body_targets
from bench.report import targets_section
from bench.target_kinds import Target
from bench.targets import targets, verdict
from tests.unit.test_bench_report import figure, results

PEERS_CONFIG = {"batch_rows": 100, "batch_clients": 16, "peer_enqueue_callers": [16, 64]}


def peers(inboxd: float, pgqueuer: float) -> dict[str, Any]:
    return {
        "config": PEERS_CONFIG,
        "figures": {
            "enqueue.inboxd.batch100.c16": figure(inboxd, "rows/s", server_s=8.0),
            "enqueue.pgqueuer.batch100.c16": figure(pgqueuer, "rows/s", server_s=0.0),
            # Not the figure compared: the inboxd figure of the peers run is the Node generator's.
            "enqueue.inboxd-python.batch100.c16": figure(1.0, "rows/s", server_s=8.0),
        },
    }


def row(bench: dict[str, Any], start: str, peers_run: dict[str, Any] | None = None) -> tuple[Target, str, str]:
    """The issue-29 target whose label starts with `start`: what it shows, and whether it is met."""
    (t,) = [t for t in targets(bench) if t.issue == "29" and t.label.startswith(start)]
    m = t.measure(bench, peers_run)
    return t, (m.shown if m.value is not None else m.missing), verdict(t, m)


def test_issue_29s_four_rows_are_on_the_targets_table_under_issue_29() -> None:
    section = targets_section(results(0.7), None)
    rows = [line for line in section if line.startswith("| raw bodies |")]
    assert len(rows) == 4
    assert any("PgQueuer's batch enqueue of 100" in r and "run `make bench-peers`" in r for r in rows)


def test_accept_batch_over_pgqueuer_divides_the_peers_runs_batch_enqueue_figures() -> None:
    bench = results(0.7)
    _t, shown, met = row(bench, "AcceptBatch of 100 ÷ PgQueuer", peers(30_000.0, 24_000.0))
    assert (shown, met) == ("1.25x (30,000 ÷ 24,000 rows/s, 16 callers)", "yes")
    _t, shown, met = row(bench, "AcceptBatch of 100 ÷ PgQueuer", peers(20_000.0, 24_000.0))
    assert met == "**no**" and shown.startswith("0.83x")
    lacking = peers(20_000.0, 24_000.0)
    del lacking["figures"]["enqueue.pgqueuer.batch100.c16"]
    _t, shown, met = row(bench, "AcceptBatch of 100 ÷ PgQueuer", lacking)
    assert met == "not measured" and "enqueue.pgqueuer.batch100.c16" in shown


def test_accept_batch_over_the_raw_insert_wants_0_6x_where_issue_13_wanted_0_5x() -> None:
    bench = results(0.55)
    _t, shown, met = row(bench, "AcceptBatch of 100 ÷ raw 100-row INSERT")
    assert shown.startswith("0.55x") and met == "**no**"
    (issue_13,) = [t for t in targets(bench) if t.issue == "13" and t.label.startswith("AcceptBatch")]
    assert verdict(issue_13, issue_13.measure(bench, None)) == "yes"


def test_server_cpu_per_batched_event_of_18_us_meets_issue_13s_bar_and_misses_29s() -> None:
    # 40,000 rows/s over the 8 s window: 320,000 rows, 18 µs of server CPU each.
    bench = results(0.5)
    bench["figures"]["inboxd.accept_batch"] = figure(40_000.0, "rows/s", server_s=320_000 * 18e-6)
    t, shown, met = row(bench, "server CPU per batched event")
    assert (shown, met) == ("18.0 µs", "**no**")
    assert t.profile == "accept_batch"
    (issue_13,) = [t for t in targets(bench) if t.issue == "13" and t.label == "server CPU per batched event"]
    assert verdict(issue_13, issue_13.measure(bench, None)) == "yes"


def test_each_missed_batch_target_of_issue_29_names_the_accept_batch_profile_under_missed_targets() -> None:
    section = targets_section(results(0.3), peers(20_000.0, 24_000.0))
    facts = section[section.index("### Missed targets: what was measured") :]
    for label, wanted in (("AcceptBatch", ">= 1.2x"), ("AcceptBatch", ">= 0.6x"), ("server CPU", "<= 15 µs")):
        start = next(
            i for i, line in enumerate(facts) if line.startswith(f"- **{label}") and line.endswith(f"{wanted}.")
        )
        block = [facts[start]]
        for line in facts[start + 1 :]:
            if not line.startswith("  - "):
                break
            block.append(line)
        assert any("profile `accept_batch`" in line for line in block), block


def test_unary_accept_before_and_after_is_a_ratio_across_runs_and_names_both() -> None:
    bench = results(1.0)
    bench["date"] = "2026-12-03 01:00 UTC"
    bench["machine"] = {"nproc": 2, "cpu": "AMD EPYC", "memory_gib": 23.5}
    bench["figures"]["inboxd.accept.c64"] = figure(1_100.0, "tx/s", server_s=7.0)
    t, shown, met = row(bench, "unary Accept at 64 callers ÷ the same before raw bodies")
    assert "a ratio across two runs" in t.label
    assert "2026-12-03 01:00 UTC" in t.label and "commit 8fe223b's run of 2026-12-02 00:35 UTC" in t.label
    assert "other processes 4% of a core at its start" in t.label
    assert (shown, met) == ("0.97x (1,100 tx/s on 2026-12-03 01:00 UTC ÷ 1,131 tx/s on 2026-12-02 00:35 UTC)", "yes")
    bench["figures"]["inboxd.accept.c64"] = figure(1_000.0, "tx/s", server_s=7.0)
    assert row(bench, "unary Accept at 64 callers")[2] == "**no**"


def test_the_figure_from_before_raw_bodies_is_the_one_published_before_the_change() -> None:
    before = load_before()
    assert before is not None
    assert (before["figure"], before["value"], before["unit"]) == ("inboxd.accept.c64", 1131.4, "tx/s")
    assert (before["git"], before["date"]) == ("8fe223b", "2026-12-02 00:35 UTC")
    assert json.loads(BEFORE.read_text()) == before


def test_without_the_stored_figure_from_before_the_row_says_it_is_not_measured(tmp_path: Path) -> None:
    bench = results(1.0)
    (t,) = [t for t in raw_body_targets(bench, tmp_path / "absent.json") if t.label.startswith("unary Accept")]
    m = t.measure(bench, None)
    assert m.value is None and "not measured" in m.missing and "before_raw_bodies.json" in m.missing
