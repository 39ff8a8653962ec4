"""The targets of issue 31 (tracing), each two figures of one run (bench/phases/tracing.py) with its bar.

Off against before is a rate ratio, with its bar (within 2%: at least
0.98x); on against off is what each Accept and each drained event costs the
server in CPU, which the issue asks to be measured and shown, with no bar.
"""

from __future__ import annotations

from typing import Any

from bench.phase_figures import Measure, PhaseFigures
from bench.phases.tracing import BEFORE, BEFORE_COMMIT, CALLERS, OFF, ON, UNMEASURED, figure_name
from bench.record import server_us_per
from bench.target_kinds import Bar, Measured, Results, Target

OFF_BAR = Bar(0.98)


FIGURES = PhaseFigures("tracing", "tracing_rounds", UNMEASURED)
missing = FIGURES.missing


def _pair(bench: Results, kind: str, a: str, b: str) -> tuple[dict[str, Any], dict[str, Any]] | Measured:
    figs = bench["figures"]
    names = (figure_name(kind, a), figure_name(kind, b))
    absent = [n for n in names if not figs.get(n)]
    if absent:
        return missing(bench, absent[0])
    return figs[names[0]], figs[names[1]]


def _windows(fig: dict[str, Any]) -> str:
    return ", ".join(f"{w['value']:,.0f}" for w in fig.get("windows", []))


def rate_ratio(kind: str) -> Measure:
    """This tree with tracing off ÷ the server before tracing, each over all its windows."""

    def measure(bench: Results, _peers: Results | None) -> Measured:
        pair = _pair(bench, kind, OFF, BEFORE)
        if isinstance(pair, Measured):
            return pair
        off, before = pair
        if not before["value"]:
            return Measured(None, missing=f"not measured: `{figure_name(kind, BEFORE)}` did nothing")
        v = float(off["value"]) / float(before["value"])
        return Measured(
            v,
            f"{v:.3f}x ({off['value']:,.0f} ÷ {before['value']:,.0f} {off['unit']}; windows {off.get('order', '?')}: "
            f"off {_windows(off)}, before {_windows(before)})",
        )

    return measure


def cpu_cost(kind: str) -> Measure:
    """Server CPU µs per Accept (per drained event) with tracing on ÷ off; the difference is shown beside."""

    def measure(bench: Results, _peers: Results | None) -> Measured:
        pair = _pair(bench, kind, ON, OFF)
        if isinstance(pair, Measured):
            return pair
        on, off = pair
        us_on, us_off = server_us_per(on), server_us_per(off)
        if not us_on or not us_off:
            return Measured(None, missing="not measured: no server CPU for one of the two figures")
        v = us_on / us_off
        sent = on.get("spans_server_sent")
        exported = f"; the traced servers sent {sent:,} spans in all" if sent else ""
        return Measured(
            v,
            f"{us_on:,.0f} µs on ÷ {us_off:,.0f} µs off = {v:.2f}x (+{us_on - us_off:,.0f} µs per {_noun(kind)}; "
            f"rate {on['value']:,.0f} ÷ {off['value']:,.0f} {on['unit']}{exported})",
        )

    return measure


def _noun(kind: str) -> str:
    return "Accept" if kind == "accept" else "drained event"


def measured(v: float) -> bool:
    """No bar: the issue asks for the cost to be measured and shown."""
    return v > 0


def tracing_targets(bench: Results) -> list[Target]:
    c = bench["config"]
    workers = int(c.get("claim_workers", 16))
    prefilled = int(c.get("claim_prefill", 150_000))
    drain = f"the drain ({workers} Work streams, credit 10, Complete on the stream, a fresh backlog of {prefilled:,})"
    same = f"same run and database, one server process each, windows alternating A B C C B A ({BEFORE_COMMIT}, off, on)"
    on = "tracing on (always_on, OTLP/gRPC to a sink in its own process)"
    return [
        Target(
            "31",
            f"tracing off (no OTEL_* variable): Accept at {CALLERS} callers ÷ the same against the server at "
            f"{BEFORE_COMMIT}, the last commit before tracing; {same}",
            "within 2% (>= 0.98x)",
            rate_ratio("accept"),
            OFF_BAR,
            (figure_name("accept", OFF), figure_name("accept", BEFORE)),
        ),
        Target(
            "31",
            f"tracing off: {drain} ÷ the same against the server at {BEFORE_COMMIT}; {same}",
            "within 2% (>= 0.98x)",
            rate_ratio("drain"),
            OFF_BAR,
            (figure_name("drain", OFF), figure_name("drain", BEFORE)),
        ),
        Target(
            "31",
            f"{on}: server CPU per Accept at {CALLERS} callers, on ÷ off",
            "measured (no bar)",
            cpu_cost("accept"),
            measured,
            (figure_name("accept", ON), figure_name("accept", OFF)),
        ),
        Target(
            "31",
            f"{on}: server CPU per drained event, {drain}, on ÷ off",
            "measured (no bar)",
            cpu_cost("drain"),
            measured,
            (figure_name("drain", ON), figure_name("drain", OFF)),
        ),
    ]
