"""docs/benchmarks.md states what was measured: a missed target is followed by figures, never a fixed verdict.

The results here are made up in the shape bench/results/bench.json stores; nothing is measured.
"""

from __future__ import annotations

import re
from typing import Any

from bench.report import targets_section
from bench.report_profiles import profiles
from bench.targets import targets, verdict

TOP = 64
SECONDS = 8.0


def figure(value: float, unit: str, *, server_s: float, generator_us: float | None = None) -> dict[str, Any]:
    """One stored figure: `value` per second over the window, the server's CPU seconds in it."""
    count = round(value * SECONDS)
    return {
        "value": value,
        "unit": unit,
        "ops": count if unit == "tx/s" else count // 10,
        "units": count,
        "cpu": {
            "seconds": SECONDS,
            # PostgreSQL 20 µs and the generator 30 µs per unit: their shares move with the rate.
            "used": {"server": server_s, "postgres": count * 20e-6, "loadgen": count * 30e-6, "client": 0.01},
        },
        "generator_cpu_us_per_op": generator_us,
    }


def results(share: float, *, scale: float = 1.0, generator_us: float = 50.0) -> dict[str, Any]:
    """A run in which every inboxd figure is `share` of what it is compared with; `scale` moves them all."""

    def rate(value: float) -> float:
        return round(value * scale, 1)

    figs = {
        f"raw.insert.c{TOP}": figure(rate(5000.0), "tx/s", server_s=0.0),
        f"inboxd.empty_rpc.c{TOP}": figure(rate(4000.0), "tx/s", server_s=8.0 * scale, generator_us=generator_us),
        f"inboxd.accept.c{TOP}": figure(rate(4000.0 * share), "tx/s", server_s=8.0 * share),
        "raw.insert_batch": figure(rate(80000.0), "rows/s", server_s=0.0),
        "inboxd.accept_batch": figure(rate(80000.0 * share), "rows/s", server_s=9.0 * scale),
        "raw.claim10": figure(rate(7000.0), "rows/s", server_s=0.0),
        "inboxd.claim10": figure(rate(7000.0 * share), "rows/s", server_s=6.0 * scale),
        "inboxd.claim10.batch": figure(rate(7000.0 * share), "rows/s", server_s=6.0 * share),
        "raw.claim1": figure(rate(1200.0), "rows/s", server_s=0.0),
        "inboxd.claim1": figure(rate(1200.0 * share), "rows/s", server_s=7.0 * scale),
    }
    profile = {
        "workload": "Accept",
        "samples": round(2000 * share),
        "parts": {"asyncio": 60.0 * share, "inboxd": 100 - 60.0 * share},
        "own": [{"function": "_run", "file": "asyncio/events.py", "percent": 50.0 * share}],
        "inclusive": [],
        "threads": {
            "event loop": {"on_cpu_percent": 90.0 * share, "waiting_percent": 40.0 * share, "slices_per_s": 1700},
            "other threads": {"on_cpu_percent": 3.0 * scale, "waiting_percent": 12.0 * scale, "slices_per_s": 900},
        },
    }
    return {
        "config": {
            "concurrency": [1, 16, TOP],
            "batch_rows": 100,
            "long_polls": 5000,
            "wake_runs": 5,
            "wake_rounds": 100,
            "backlog_rows": 100_000,
            "cold_window": 3.0,
            "history_rows": 5_000_000,
        },
        "support": {},
        "figures": figs,
        "profiles": {name: profile for name in ("accept", "accept_batch", "claim10")},
    }


def missed_lines(bench: dict[str, Any]) -> list[str]:
    section = targets_section(bench, None)
    start = section.index("### Missed targets: what was measured")
    return [line for line in section[start + 1 :] if line.strip()]


def test_a_missed_target_is_followed_by_its_figures_and_no_sentence_written_in_advance() -> None:
    # Two runs that miss the same targets by different margins: every line under the missed
    # targets carries something measured, so no line may read the same in both.
    first, second = missed_lines(results(0.3)), missed_lines(results(0.4, scale=1.3))
    assert first, "the made-up run misses no target"
    assert len(first) == len(second)
    same = set(first) & set(second)
    assert not same, f"fixed text under the missed targets, whatever was measured: {sorted(same)}"


# The words the facts under a missed target are made of, besides the target's own label and wanted value,
# figure and function names (in backticks) and profile file names. A sentence of other words is a
# verdict written in advance ("... cannot reach this target", "so most of the loss is ..."): not a fact.
FACT_WORDS = {"wanted", "CPU", "in", "of", "a", "core", "per", "call", "row", "µs", "profile", "samples"}
FACT_WORDS |= {"own", "by", "part", "its", "top", "frames", "server", "postgres", "loadgen", "client", "other"}
# The profile's threads (bench/thread_time.py): each kind's share of the window on a CPU and waiting for one.
FACT_WORDS |= {"threads", "over", "the", "window", "event", "loop", "on", "waiting", "for", "one", "were", "not"}
FACT_WORDS |= {"loop's"}


def without(line: str, known: list[str]) -> str:
    """`line` less its backticked names and the `known` texts, longest first."""
    rest = re.sub(r"`[^`]*`", " ", line)
    for text in sorted(known, key=len, reverse=True):
        rest = rest.replace(text, " ")
    return rest


def test_the_facts_under_a_missed_target_use_no_words_but_the_facts_own() -> None:
    bench = results(0.3)
    lines = missed_lines(bench)
    known = [s for t in targets(bench) for s in (t.label, t.wanted, t.measure(bench, None).shown)]
    known += [f["file"] for p in bench["profiles"].values() for f in p["own"]]
    words = {word for line in lines for word in re.findall(r"[^\W\d_][\w']*", without(line, known))}
    assert words, "no facts under the missed targets"
    unexplained = words - FACT_WORDS - set(bench["profiles"]["accept"]["parts"])
    assert not unexplained, f"words no fact accounts for under the missed targets: {sorted(unexplained)}"


def test_the_accept_bar_follows_the_measured_generator_share() -> None:
    # Issue 13: 0.8x of the empty RPC while the generator's CPU per call is below the server's, 0.6x otherwise.
    label = f"Accept at {TOP} callers ÷ empty-RPC rate (same generator, same callers)"

    def accept_target(generator_us: float) -> tuple[str, str]:
        bench = results(0.7, generator_us=generator_us)
        (target,) = [t for t in targets(bench) if t.label == label]
        return target.wanted, verdict(target, target.measure(bench, None))

    # The server spends 8 s over 32,000 empty calls: 250 µs a call.
    cheap_wanted, cheap_met = accept_target(50.0)
    assert cheap_wanted.startswith(">= 0.8x") and "0.20x" in cheap_wanted
    assert cheap_met == "**no**"
    dear_wanted, dear_met = accept_target(300.0)
    assert dear_wanted.startswith(">= 0.6x") and "1.20x" in dear_wanted
    assert dear_met == "yes"


def test_the_earlier_profile_is_described_by_its_stored_load_not_a_judgement() -> None:
    def before_line(busy: float) -> str:
        before = {"git": "abc1234", "date": "2026-12-01 07:06 UTC", "busy_before_start": busy}
        before["profiles"] = results(0.3)["profiles"]
        (line,) = [line for line in profiles({}, before) if line.startswith("Before:")]
        return line

    assert "193% of a core" in before_line(193.4)
    assert "3% of a core" in before_line(3.0)
    assert before_line(193.4) != before_line(3.0)
