"""The targets of issue 28 (flow control), each a figure of one run (bench/phases/flow.py) with its bar.

As in targets.py: a figure that could not be measured says why (the figure
failed, the phase failed or did not run), never a number. The counts are
the claims ledger's and EXPLAIN's, not timers'.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.phase_figures import Measure, PhaseFigures
from bench.phases.flow import (
    BATCH,
    DRAIN_NONE,
    DRAIN_RULES,
    FAIRNESS,
    FLOW_WORKERS,
    IN_FLIGHT,
    MAX_IN_FLIGHT,
    PLAN,
    PLAN_SAMPLES,
    QUIET_EVENTS,
    RATE,
    RATE_BURST,
    RATE_PER_S,
    RATE_SKIP_S,
    SERVER_PROCESSES,
    UNMEASURED,
)
from bench.phases.flow_baseline import BASELINE, BASELINE_COMMIT, BEFORE, FAIR
from bench.target_kinds import Bar, Measured, Results, Target

FAIRNESS_BAR = Bar(20.0, at_most=True)
PLAN_MS = Bar(2.0, at_most=True)
# "A bounded number of rows": a hundred per event a Claim of 10 asks for, whatever the namespaces hold.
PLAN_ROWS = Bar(100.0 * BATCH, at_most=True)
RATE_TOLERANCE = 0.10
DRAIN_BAR = Bar(0.9)
FAIR_BAR = Bar(0.95)


FIGURES = PhaseFigures("flow", "flow_noisy", UNMEASURED)
missing = FIGURES.missing
_figure = FIGURES.figure


def _fairness(fig: dict[str, Any]) -> Measured:
    v = float(fig["value"])
    return Measured(v, f"{v:,.0f} of {fig['noisy']:,} events")


def _plan_ms(fig: dict[str, Any]) -> Measured:
    g = fig["generic"]
    samples = g.get("samples_ms") or [g["execution_ms"]]
    spread = f"median of {len(samples)}, {min(samples):.2f} to {max(samples):.2f} ms; " if len(samples) > 1 else ""
    return Measured(
        float(g["execution_ms"]),
        f"{g['execution_ms']:.2f} ms ({spread}custom plan: {fig['custom']['execution_ms']:.2f} ms)",
    )


def _plan_rows(fig: dict[str, Any]) -> Measured:
    g = fig["generic"]
    backlog = int(fig["namespaces"]) * int(fig["events_per_namespace"])
    return Measured(
        float(g["rows_read"]), f"{g['rows_read']:,} rows, {g['buffers']:,} buffers (of a backlog of {backlog:,})"
    )


def _in_flight(fig: dict[str, Any]) -> Measured:
    v = float(fig["value"])
    above = float(fig["seconds_above_limit"])
    ended = (
        f"{fig['completed']:,} of {fig['events']:,} completed when stopped after {fig['seconds']:.0f} s"
        if fig["timed_out"]
        else f"{fig['events']:,} drained in {fig['seconds']:.1f} s"
    )
    # Ledger times are transaction starts: an excess a fraction of a millisecond long is that skew.
    lasting = f"{above:.2f} s" if above >= 1 else f"{above * 1000:.3f} ms"
    over = f", above {fig['max_in_flight']} for {lasting} in all" if above else ""
    if above and "stretches_above_limit" in fig:
        longest = float(fig["longest_above_limit_s"]) * 1000
        over += f" over {fig['stretches_above_limit']:,} stretches, the longest {longest:.3f} ms"
    return Measured(v, f"{v:.0f} leases ({fig['claims']:,} claims; {ended}{over})")


def in_flight_met(v: float) -> bool:
    """The limit reached (16 workers want more) and never passed."""
    return v == MAX_IN_FLIGHT


def _rate(fig: dict[str, Any]) -> Measured:
    v = float(fig["value"])
    seconds = fig["per_second"]
    spread = f"; each second {min(seconds)} to {max(seconds)}" if seconds else ""
    return Measured(v, f"{v:.1f} /s ({fig['in_window']:,} in {fig['window_s']:g} s{spread})")


def rate_met(v: float) -> bool:
    return abs(v - RATE_PER_S) <= RATE_TOLERANCE * RATE_PER_S


def ratio_of(a: str, b: str, note: Callable[[dict[str, Any], dict[str, Any]], str] | None = None) -> Measure:
    """Figure `a` over figure `b` of this run, rates shown; either absent: why."""

    def measure(bench: Results, _peers: Results | None) -> Measured:
        figs = bench["figures"]
        absent = [name for name in (a, b) if not figs.get(name)]
        if absent:
            # The one whose failure was recorded says why; the other is absent because of it.
            said = [name for name in absent if name in (bench.get(UNMEASURED) or {})]
            return missing(bench, (said or absent)[0])
        fa, fb = figs[a], figs[b]
        if not fb["value"]:
            return Measured(None, missing=f"not measured: `{b}` did nothing")
        v = float(fa["value"]) / float(fb["value"])
        extra = f"; {note(fa, fb)}" if note else ""
        return Measured(v, f"{v:.2f}x ({fa['value']:,.0f} ÷ {fb['value']:,.0f} {fb['unit']}{extra})")

    return measure


def _drain_windows(fa: dict[str, Any], fb: dict[str, Any]) -> str:
    """The drains' windows in the order they ran (a run before A B B A stored one window each, and no order)."""
    if "order" not in fa:
        return "one window each"
    rules = ", ".join(f"{w['value']:,.0f}" for w in fa.get("windows", []))
    none = ", ".join(f"{w['value']:,.0f}" for w in fb.get("windows", []))
    return f"windows {fa['order']}: rules {rules}, none {none}"


def _windows(fa: dict[str, Any], fb: dict[str, Any]) -> str:
    shown = ", ".join(f"{w:,.0f}" for w in fa.get("windows", []))
    before = ", ".join(f"{w:,.0f}" for w in fb.get("windows", []))
    return f"windows {fa.get('order', '?')}: fair {shown}, before {before}"


def flow_targets(bench: Results) -> list[Target]:
    c = bench["config"]
    noisy = int(c.get("flow_noisy", 2000))
    namespaces = int(c.get("flow_namespaces", 10_000))
    events = int(c.get("flow_in_flight_events", 10_000))
    window = float(c.get("flow_rate_seconds", 30.0))
    rules = int(c.get("flow_other_rules", 20))
    workers = int(c.get("claim_workers", 16))
    prefilled = int(c.get("claim_prefill", 150_000))
    on = f"{FLOW_WORKERS} workers over {SERVER_PROCESSES} server processes"
    plan = (
        f"Claim over every namespace, {namespaces:,} namespaces holding backlog (3 events each), max_events "
        f"{BATCH}, generic plan (EXPLAIN ANALYZE, the median of {PLAN_SAMPLES} runs)"
    )
    return [
        Target(
            "28",
            f"a quiet namespace's {QUIET_EVENTS} events accepted after another's {noisy:,}, one worker Claiming "
            f"every namespace {BATCH} at a time and completing each batch: the noisy namespace's events handed out "
            "no later than the Claim that took the quiet one's last (inbox_claims)",
            "<= 20 (one turn per batch of 10)",
            _figure(FAIRNESS, _fairness),
            FAIRNESS_BAR,
        ),
        Target("28", f"{plan}: execution time", "<= 2 ms", _figure(PLAN, _plan_ms), PLAN_MS),
        Target(
            "28",
            f"{plan}: rows read by its scans",
            f"<= {PLAN_ROWS.value:,.0f} rows",
            _figure(PLAN, _plan_rows),
            PLAN_ROWS,
        ),
        Target(
            "28",
            f"max_in_flight {MAX_IN_FLIGHT} on one namespace, {on}, {events:,} events: most of its leases held at "
            "one instant, from the intervals of inbox_claims (claimed_at to ended_at)",
            f"{MAX_IN_FLIGHT}, never {MAX_IN_FLIGHT + 1}",
            _figure(IN_FLIGHT, _in_flight),
            in_flight_met,
        ),
        Target(
            "28",
            f"rate {RATE_PER_S:g}/s (burst {RATE_BURST}) on one namespace, {on}: events handed out per second, "
            f"from inbox_claims, over {window:g} s from {RATE_SKIP_S:g} s after the first",
            f"within ±10% of {RATE_PER_S:g}",
            _figure(RATE, _rate),
            rate_met,
        ),
        Target(
            "28",
            f"Claim {BATCH} -> Complete drain of one namespace, {workers} workers (as inboxd.claim10), with {rules} "
            "rules on other namespaces (names and patterns that nearly match it) ÷ the same drain with none, "
            "windows alternating A B B A (none, rules)",
            ">= 0.9x",
            ratio_of(DRAIN_RULES, DRAIN_NONE, _drain_windows),
            DRAIN_BAR,
            (DRAIN_RULES, DRAIN_NONE),
        ),
        Target(
            "28",
            f"fair claiming over one namespace ÷ the claim before it: the raw psycopg loop ({workers} connections, "
            f"Claim {BATCH} then one fenced completion, generic plans) with this checkout's claim statement ÷ the "
            f"same with the statement at {BASELINE_COMMIT} (bench/baselines/{BASELINE.name}), same database, "
            f"each window from a fresh backlog of {prefilled:,} events, windows alternating A B B A",
            ">= 0.95x",
            ratio_of(FAIR, BEFORE, _windows),
            FAIR_BAR,
            (FAIR, BEFORE),
        ),
    ]
