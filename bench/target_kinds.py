"""What a target is, and the measures several targets' modules share: below targets.py and every *_targets.py.

targets.py gathers the targets of every module; each *_targets.py builds on
these kinds and measures, never on targets.py, so no module of the targets
imports another in a circle.

A target that could not be measured says why (the server lacks a feature, or
`make bench-peers` has not run) and has no value: never a number that was not
measured.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.figures import Figures, ratio
from bench.record import per_op_us, server_us_per

Results = dict[str, Any]


@dataclass(frozen=True)
class Measured:
    value: float | None
    shown: str = "-"
    missing: str = ""


@dataclass(frozen=True)
class Bar:
    """Where a figure meets its target: at least `value`, or (at_most) at most; the chart draws it too."""

    value: float
    at_most: bool = False

    def __call__(self, v: float) -> bool:
        return v <= self.value if self.at_most else v >= self.value


@dataclass(frozen=True)
class Target:
    issue: str
    label: str
    wanted: str
    measure: Callable[[Results, Results | None], Measured]
    met: Callable[[float], bool]
    # The figures whose CPU split, and the profile whose top frames, are the facts shown for a miss.
    explain: tuple[str, ...] = ()
    profile: str | None = None


def _lacks(bench: Results, feature: str) -> str:
    found = bench.get("support", {}).get(feature)
    return f"not measured: server lacks {feature} ({found['reason'] if found else 'not detected'})"


@dataclass(frozen=True)
class _Ratio:
    """Figure `a` of this run over figure `b`; `feature`, when named, is what the server needs for `a`."""

    a: str
    b: str
    feature: str | None = None

    def __call__(self, bench: Results, _peers: Results | None) -> Measured:
        a, b, figs = self.a, self.b, bench["figures"]
        v = ratio(figs, a, b)
        if v is None:
            if self.feature and not bench.get("support", {}).get(self.feature, {}).get("supported"):
                return Measured(None, missing=_lacks(bench, self.feature))
            return Measured(None, missing=f"not measured: no `{a if a not in figs else b}` in this run")
        return Measured(v, f"{v:.2f}x ({figs[a]['value']:,.0f} ÷ {figs[b]['value']:,.0f} {figs[b]['unit']})")


def _cpu_ratio(a: str, b: str) -> Callable[[Results, Results | None], Measured]:
    def measure(bench: Results, _peers: Results | None) -> Measured:
        figs: Figures = bench["figures"]
        us_a = per_op_us(figs[a], "server") if a in figs else None
        us_b = per_op_us(figs[b], "server") if b in figs else None
        if not us_a or not us_b:
            return Measured(None, missing="not measured: no server CPU for one of the two figures")
        return Measured(us_a / us_b, f"{us_a / us_b:.2f}x ({us_a:,.0f} µs ÷ {us_b:,.0f} µs)")

    return measure


def _generator_share(name: str) -> Callable[[Results, Results | None], Measured]:
    def measure(bench: Results, _peers: Results | None) -> Measured:
        fig = bench["figures"].get(name)
        gen = fig.get("generator_cpu_us_per_op") if fig else None
        server = per_op_us(fig, "server") if fig else None
        if not gen or not server:
            return Measured(None, missing="not measured")
        return Measured(gen / server, f"{gen / server:.2f}x ({gen:,.0f} µs ÷ {server:,.0f} µs)")

    return measure


def _batched_event_cpu(bench: Results, _peers: Results | None) -> Measured:
    fig = bench["figures"].get("inboxd.accept_batch")
    us = server_us_per(fig, "server") if fig else None
    return Measured(us, f"{us:,.1f} µs") if us is not None else Measured(None, missing="not measured")


def better_peer(values: dict[str, float]) -> tuple[str, float] | None:
    peers = {k: v for k, v in values.items() if not k.startswith("inboxd")}
    return max(peers.items(), key=lambda kv: kv[1]) if peers else None
