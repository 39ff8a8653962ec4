"""The targets of issue 44 (the edge's speed), each from figures of one run (bench/phases/edge.py) with its bar.

The edge over the bare app has a bar (at least 0.5x); `--workers 2` over one
process and the edge's CPU per delivery are to be measured and shown, each
with what explains it: the CPU split between the edge's processes, inboxd
and PostgreSQL, and the edge's profile (in the page's edge section).
"""

from __future__ import annotations

from typing import Any

from bench.edge_requests import BODY_BYTES
from bench.phase_figures import PhaseFigures
from bench.phases.edge import BARE, ONE, TWO, UNIT, figure_name
from bench.record import per_op_us, percent_of_core
from bench.target_kinds import Bar, Measured, Results, Target

EDGE_OVER_BARE = Bar(0.5)
FIGURES = PhaseFigures("edge", "edge_rounds", "edge_unmeasured")
missing = FIGURES.missing


def _pair(bench: Results, a: str, b: str) -> tuple[dict[str, Any], dict[str, Any]] | Measured:
    figs = bench["figures"]
    names = (figure_name(a), figure_name(b))
    absent = [n for n in names if not figs.get(n)]
    if absent:
        return missing(bench, absent[0])
    return figs[names[0]], figs[names[1]]


def _windows(fig: dict[str, Any]) -> str:
    return ", ".join(f"{w['value']:,.0f}" for w in fig.get("windows", []))


def _pct(fig: dict[str, Any], part: str) -> str:
    v = percent_of_core(fig, part)
    return "-" if v is None else f"{v:.0f}%"


def worker_split(fig: dict[str, Any]) -> str:
    """Each edge process's CPU in % of a core over the figure's windows: "worker1 40%, worker2 35%, parent 0%"."""
    cpu = fig.get("cpu") or {}
    seconds = float(cpu.get("seconds") or 0.0)
    split: dict[str, float] = fig.get("edge_processes") or {}
    if not seconds or not split:
        return ""
    ordered = sorted(split, key=lambda k: (k == "parent", k))
    return ", ".join(f"{k} {100 * split[k] / seconds:.0f}%" for k in ordered)


def edge_over_bare(bench: Results, _peers: Results | None) -> Measured:
    pair = _pair(bench, ONE, BARE)
    if isinstance(pair, Measured):
        return pair
    edge, bare = pair
    if not bare["value"]:
        return Measured(None, missing=f"not measured: `{figure_name(BARE)}` answered nothing")
    v = float(edge["value"]) / float(bare["value"])
    return Measured(
        v,
        f"{v:.2f}x ({edge['value']:,.0f} ÷ {bare['value']:,.0f} {UNIT}; windows {edge.get('order', '?')}: "
        f"edge {_windows(edge)}, bare app {_windows(bare)})",
    )


def workers_ratio(bench: Results, _peers: Results | None) -> Measured:
    pair = _pair(bench, TWO, ONE)
    if isinstance(pair, Measured):
        return pair
    two, one = pair
    if not one["value"]:
        return Measured(None, missing=f"not measured: `{figure_name(ONE)}` answered nothing")
    v = float(two["value"]) / float(one["value"])
    return Measured(
        v,
        f"{v:.2f}x ({two['value']:,.0f} ÷ {one['value']:,.0f} {UNIT}); CPU in % of a core: `--workers 2` "
        f"edge {_pct(two, 'edge')} ({worker_split(two) or 'no split'}), inboxd {_pct(two, 'server')}, "
        f"PostgreSQL {_pct(two, 'postgres')}, generator {_pct(two, 'loadgen')}, other {_pct(two, 'other')}; "
        f"one process: edge {_pct(one, 'edge')}, inboxd {_pct(one, 'server')}, PostgreSQL {_pct(one, 'postgres')}, "
        f"generator {_pct(one, 'loadgen')}, other {_pct(one, 'other')}",
    )


def _us(fig: dict[str, Any], part: str) -> str:
    v = per_op_us(fig, part)
    return "-" if v is None else f"{v:,.0f} µs"


def edge_cpu_per_delivery(bench: Results, _peers: Results | None) -> Measured:
    fig = bench["figures"].get(figure_name(ONE))
    if not fig:
        return missing(bench, figure_name(ONE))
    us = per_op_us(fig, "edge")
    if us is None:
        return Measured(None, missing="not measured: no edge CPU for the window")
    bare = bench["figures"].get(figure_name(BARE))
    floor = f"; the bare app's per request {_us(bare, 'bare')}" if bare else ""
    profile = (bench.get("edge") or {}).get("profile") or {}
    parts = ", ".join(f"{k} {v:.0f}%" for k, v in list(profile.get("parts", {}).items())[:4])
    shown_profile = f"; profile (own samples by part): {parts}" if parts else "; no profile"
    return Measured(
        us,
        f"{us:,.0f} µs (beside it per delivery: inboxd {_us(fig, 'server')}, PostgreSQL {_us(fig, 'postgres')}, "
        f"generator {_us(fig, 'loadgen')}{floor}{shown_profile})",
    )


def measured(v: float) -> bool:
    """No bar: the issue asks for the figure to be measured and shown."""
    return v > 0


def edge_targets(bench: Results) -> list[Target]:
    c = bench["config"]
    conns = int(c.get("edge_connections", 64))
    same = (
        f"same pre-signed requests from the same generator, {conns} keep-alive connections, windows alternating "
        "A B C C B A (bare app, one edge process, `--workers 2`)"
    )
    delivery = (
        f"GitHub push deliveries (`github` preset: HMAC-SHA256 of the body), {BODY_BYTES:,} B JSON, each its own event"
    )
    return [
        Target(
            "44",
            f"{delivery}: per second through one edge process into inboxd ÷ a bare aiohttp app answering 200 to the "
            f"same requests; {same}",
            ">= 0.5x",
            edge_over_bare,
            EDGE_OVER_BARE,
            (figure_name(ONE), figure_name(BARE)),
        ),
        Target(
            "44",
            f"the same through `inboxd-edge --workers 2` ÷ one edge process, on this {_cores(bench)}-core machine",
            "measured, with the CPU split",
            workers_ratio,
            measured,
            (figure_name(TWO), figure_name(ONE)),
        ),
        Target(
            "44",
            f"edge CPU per delivery, one process ({delivery})",
            "measured, with a profile",
            edge_cpu_per_delivery,
            measured,
            (figure_name(ONE),),
        ),
    ]


def _cores(bench: Results) -> str:
    return str((bench.get("machine") or {}).get("nproc", "?"))
