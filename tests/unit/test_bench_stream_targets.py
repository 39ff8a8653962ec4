"""Issue 27's rows on docs/benchmarks.md: each a figure of the run, or why it is not measured, never a guess.

The results are made up in the shape bench/results/bench.json stores; nothing is measured.
"""

from __future__ import annotations

from typing import Any

from bench.phases.work import WORK_RECOVERY, WORK_WAKEUP
from bench.report_streams import streams
from bench.stream_targets import stream_targets
from bench.targets import verdict

NOT_SERVED = {"supported": False, "reason": "the server answers Work with UNIMPLEMENTED (not served)"}


def run(figures: dict[str, Any], support: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"config": {"idle_streams": 5000}, "support": support or {}, "figures": figures}


def rows(bench: dict[str, Any]) -> dict[str, tuple[str, str]]:
    found = {}
    for t in stream_targets(bench):
        m = t.measure(bench, None)
        found[t.label] = (m.shown if m.value is not None else m.missing, verdict(t, m))
    return found


def test_against_a_server_without_work_every_work_row_says_why_it_is_not_measured() -> None:
    found = rows(run({}, {"work": NOT_SERVED, "accept_stream": NOT_SERVED}))
    assert len(found) == 11
    for label, (shown, met) in found.items():
        assert met == "not measured", label
        assert "not measured" in shown, label
    served = [shown for label, (shown, _) in found.items() if "make bench-peers" not in label]
    assert all("UNIMPLEMENTED (not served)" in shown for shown in served)


def test_a_recovery_run_that_timed_out_shows_its_cap_as_a_floor_and_misses() -> None:
    runs = [{"run": 1, "seconds": 0.05, "timed_out": False}, {"run": 2, "seconds": 5.0, "timed_out": True}]
    bench = run({WORK_RECOVERY: {"value": 5.0, "unit": "s", "runs": runs, "held": 10}})
    [(shown, met)] = [v for label, v in rows(bench).items() if "SIGKILLed" in label]
    assert shown == "0.050 s, > 5.000 s (worst 5.000 s)"
    assert met == "**no**"
    assert any("> 5 s (not pushed)" in line for line in streams(bench))


def test_the_wake_up_target_is_met_only_when_every_run_is() -> None:
    def wake(p99s: list[float]) -> tuple[str, str]:
        runs = [
            {"run": i + 1, "rounds": 500, "p50_ms": 1.0, "p90_ms": 2.0, "p99_ms": v, "max_ms": v}
            for i, v in enumerate(p99s)
        ]
        bench = run({WORK_WAKEUP: {"value": max(p99s), "unit": "ms", "runs": runs, "p99_ms": max(p99s)}})
        [found] = [v for label, v in rows(bench).items() if label.startswith("wake-up p99")]
        return found

    assert wake([1.0, 2.0, 3.0, 4.0, 4.9])[1] == "yes"
    shown, met = wake([1.0, 2.0, 6.0, 4.0, 4.9])
    assert met == "**no**"
    assert shown.startswith("1.00 ms, 2.00 ms, 6.00 ms")
