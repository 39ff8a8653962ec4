"""The targets of issue 30 (bulk operations), each a figure of one run (bench/phases/bulk.py) with its bar.

As in targets.py: a figure that could not be measured says why (its failure,
the phase's, or a harness without the phase), never a number. The counts are
the audit rows' and GetBulkOperation's; only the Claim latencies are timed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.phase_figures import PhaseFigures
from bench.phases.bulk import BATCH, CHANGED, CLAIM_DURING, CLAIM_IDLE, RATE, UNMEASURED
from bench.target_kinds import Bar, Measured, Results, Target

RATE_TOLERANCE = 0.15
CLAIM_P99_BAR = Bar(2.0, at_most=True)


FIGURES = PhaseFigures("bulk", "bulk_events", UNMEASURED)
missing = FIGURES.missing
_figure = FIGURES.figure


def _rate(fig: dict[str, Any]) -> Measured:
    v = float(fig["value"])
    seconds = fig.get("per_second") or []
    # The first and last seconds hold part of a second each: the spread is of the whole ones between.
    inner = seconds[1:-1]
    spread = f"; each whole second {min(inner):,} to {max(inner):,}" if inner else ""
    return Measured(
        v,
        f"{v:,.0f} /s ({fig['done']:,} in {fig['seconds']:.1f} s, started to ended; between the first and the "
        f"last chunk's audit rows {fig['audit_rate']:,.0f} /s{spread})",
    )


def rate_met(rate: float) -> Callable[[float], bool]:
    def met(v: float) -> bool:
        return abs(v - rate) <= RATE_TOLERANCE * rate

    return met


def _changed(fig: dict[str, Any]) -> Measured:
    v = float(fig["value"])
    twice = int(fig["audit_rows"]) - int(fig["distinct_events"])
    return Measured(
        v,
        f"{v:,.0f} events in {fig['audit_rows']:,} audit rows ({twice:,} changed twice); the operation says done "
        f"{fig['done']:,}, skipped {fig['skipped']:,} of {fig['matched']:,} matched; {fig['pending_replayed']:,} "
        "now PENDING and marked replayed",
    )


def changed_met(events: int) -> Callable[[float], bool]:
    """Every event once: as many distinct events as dead letters, and (checked by the row) no repeated row."""

    def met(v: float) -> bool:
        return v == events

    return met


def changed_once(bench: Results, _peers: Results | None) -> Measured:
    fig = bench["figures"].get(CHANGED)
    if not fig:
        return missing(bench, CHANGED)
    m = _changed(fig)
    if fig["audit_rows"] != fig["distinct_events"] or fig["done"] != fig["distinct_events"]:
        # A repeated row, or a count the operation reports that the audit does not bear out: not "each once".
        return Measured(-1.0, m.shown)
    return m


def claim_ratio(bench: Results, _peers: Results | None) -> Measured:
    figs = bench["figures"]
    idle, during = figs.get(CLAIM_IDLE), figs.get(CLAIM_DURING)
    if not idle or not during:
        return missing(bench, CLAIM_IDLE if not idle else CLAIM_DURING)
    if not idle["p99_ms"]:
        return Measured(None, missing=f"not measured: `{CLAIM_IDLE}` has no latencies")
    v = float(during["p99_ms"]) / float(idle["p99_ms"])
    return Measured(
        v,
        f"{v:.2f}x (p99 {during['p99_ms']:.2f} ms during, {during['ops']:,} Claims, ÷ {idle['p99_ms']:.2f} ms idle, "
        f"{idle['ops']:,} Claims; p50 {during['p50_ms']:.2f} ÷ {idle['p50_ms']:.2f} ms)",
    )


def bulk_targets(bench: Results) -> list[Target]:
    c = bench["config"]
    events = int(c.get("bulk_events", 50_000))
    rate = float(c.get("bulk_rate", 2000.0))
    claimers = int(c.get("bulk_claimers", 8))
    replay = f"{events:,} dead letters replayed by one StartBulkOperation REPLAY at rate {rate:,.0f}/s"
    return [
        Target(
            "30",
            f"{replay}: events changed ÷ its running time (GetBulkOperation: done ÷ finished_at - started_at); "
            "no raw-PostgreSQL baseline: the rate is the runner's pacing, not a speed",
            f"within ±{RATE_TOLERANCE:.0%} of {rate:,.0f}",
            _figure(RATE, _rate),
            rate_met(rate),
        ),
        Target(
            "30",
            f"{replay}: events changed, counted from the audit rows naming the operation (inbox_replays)",
            f"exactly {events:,}, each once",
            changed_once,
            changed_met(events),
        ),
        Target(
            "30",
            f"Claim p99 of {claimers} callers (Claim {BATCH}, no wait, then CompleteBatch) on another namespace's "
            f"backlog while the replay runs ÷ the same over a window before it",
            "<= 2x",
            claim_ratio,
            CLAIM_P99_BAR,
            (CLAIM_DURING, CLAIM_IDLE),
        ),
    ]
