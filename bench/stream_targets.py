"""The targets of issue 27 (the streams), each a figure of one run with its wanted value.

As in targets.py: a figure that could not be measured says why (the server
does not serve the stream, `make bench-peers` has not run), never a number.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.figures import peer_rates
from bench.peer_work import WORK_DRAIN
from bench.phases.idle_streams import WORK_IDLE
from bench.phases.streams import STREAMED as ACCEPT_STREAMED
from bench.phases.streams import UNARY as ACCEPT_UNARY
from bench.phases.work import RAW_CLAIM10, WORK_CLAIM, WORK_RECOVERY, WORK_WAKEUP
from bench.record import server_us_per
from bench.support import ACCEPT_STREAM, WORK
from bench.target_kinds import Bar, Measured, Results, Target, _generator_share, _lacks, _Ratio, better_peer

Measure = Callable[[Results, Results | None], Measured]


def _absent(bench: Results, name: str, feature: str) -> Measured:
    if not bench.get("support", {}).get(feature, {}).get("supported"):
        return Measured(None, missing=_lacks(bench, feature))
    return Measured(None, missing=f"not measured: no `{name}` in this run")


def _cpu_per_unit(name: str, part: str, feature: str) -> Measure:
    """`part`'s CPU µs per unit of figure `name`, the generator's own beside it when it drove the figure."""

    def measure(bench: Results, _peers: Results | None) -> Measured:
        fig = bench["figures"].get(name)
        us = server_us_per(fig, part) if fig else None
        if fig is None or us is None:
            return _absent(bench, name, feature)
        gen = fig.get("generator_cpu_us_per_op")
        beside = f" (the generator's own: {gen:,.0f} µs)" if gen and part == "server" else ""
        return Measured(us, f"{us:,.0f} µs{beside}")

    return measure


def _generator_share_of(name: str, feature: str) -> Measure:
    share = _generator_share(name)

    def measure(bench: Results, peers: Results | None) -> Measured:
        return share(bench, peers) if name in bench["figures"] else _absent(bench, name, feature)

    return measure


def _field(name: str, key: str, fmt: str) -> Measure:
    def measure(bench: Results, _peers: Results | None) -> Measured:
        fig = bench["figures"].get(name)
        if fig is None or fig.get(key) is None:
            return _absent(bench, name, WORK)
        return Measured(float(fig[key]), fmt.format(float(fig[key])))

    return measure


def _runs(name: str, key: str, fmt: str) -> Measure:
    """The worst of a figure's runs, every run shown."""

    def measure(bench: Results, _peers: Results | None) -> Measured:
        fig = bench["figures"].get(name)
        if not fig or not fig.get("runs"):
            return _absent(bench, name, WORK)
        values = [float(r[key]) for r in fig["runs"]]
        # A run that timed out shows its cap as "> cap".
        shown = [("> " if r.get("timed_out") else "") + fmt.format(float(r[key])) for r in fig["runs"]]
        return Measured(max(values), ", ".join(shown) + f" (worst {fmt.format(max(values))})")

    return measure


def _work_drain_over_peer(_bench: Results, peers: Results | None) -> Measured:
    if peers is None or not peers.get("rounds"):
        return Measured(None, missing="not measured: run `make bench-peers`")
    rates = peer_rates(peers)
    best = better_peer(rates)
    if WORK_DRAIN not in rates or best is None or not best[1]:
        lacks = peers.get("support", {}).get(WORK, {})
        why = f"server lacks work ({lacks['reason']})" if lacks and not lacks.get("supported") else "no Work drain"
        return Measured(None, missing=f"not measured in the peers run: {why}")
    v = rates[WORK_DRAIN] / best[1]
    return Measured(v, f"{v:.2f}x ({rates[WORK_DRAIN]:,.0f} ÷ {best[0]} {best[1]:,.0f} jobs/s)")


def stream_targets(bench: Results) -> list[Target]:
    idle: dict[str, Any] = bench["figures"].get(WORK_IDLE) or {}
    streams = f"{idle.get('streams') or bench['config'].get('idle_streams', 5000):,}"
    return [
        Target(
            "27",
            "Accept over AcceptStream, 64 items in flight on 4 streams ÷ unary Accept at 64 callers (same generator)",
            ">= 2.5x",
            _Ratio(ACCEPT_STREAMED, ACCEPT_UNARY, ACCEPT_STREAM),
            Bar(2.5),
            (ACCEPT_STREAMED, ACCEPT_UNARY),
            "accept_stream",
        ),
        Target(
            "27",
            "server CPU per event over AcceptStream",
            "<= 100 µs",
            _cpu_per_unit(ACCEPT_STREAMED, "server", ACCEPT_STREAM),
            Bar(100.0, at_most=True),
            (ACCEPT_STREAMED,),
            "accept_stream",
        ),
        Target(
            "27",
            "load generator CPU per event ÷ server CPU per event, over AcceptStream",
            "< 1.0x",
            _generator_share_of(ACCEPT_STREAMED, ACCEPT_STREAM),
            lambda v: v < 1.0,
            (ACCEPT_STREAMED,),
        ),
        Target(
            "27",
            "drain through Work ÷ the best peer's (make bench-peers)",
            ">= 2.5x",
            _work_drain_over_peer,
            Bar(2.5),
        ),
        Target(
            "27",
            "Work claim -> complete, 16 workers ÷ raw claim-10-then-complete",
            ">= 0.9x",
            _Ratio(WORK_CLAIM, RAW_CLAIM10, WORK),
            Bar(0.9),
            (WORK_CLAIM, RAW_CLAIM10),
            "work",
        ),
        Target(
            "27",
            "PostgreSQL CPU per drained event (Work claim -> complete, 16 workers)",
            "<= 150 µs",
            _cpu_per_unit(WORK_CLAIM, "postgres", WORK),
            Bar(150.0, at_most=True),
            (WORK_CLAIM, RAW_CLAIM10),
        ),
        Target(
            "27",
            "a SIGKILLed worker's events pushed to another worker's Work stream, five runs",
            "<= 1 s in every run",
            _runs(WORK_RECOVERY, "seconds", "{:.3f} s"),
            Bar(1.0, at_most=True),
        ),
        Target(
            "27",
            f"{streams} idle Work streams: server CPU",
            "<= 5% of a core",
            _field(WORK_IDLE, "server_cpu_percent", "{:.1f}% of a core"),
            Bar(5.0, at_most=True),
        ),
        Target(
            "27",
            f"{streams} idle Work streams: database transactions",
            "<= 10 /s",
            _field(WORK_IDLE, "db_transactions_per_s", "{:,.1f} /s"),
            Bar(10.0, at_most=True),
        ),
        Target(
            "27",
            f"{streams} idle Work streams: server RSS",
            "<= 400 MB",
            _field(WORK_IDLE, "rss_mb", "{:.0f} MB"),
            Bar(400.0, at_most=True),
        ),
        Target(
            "27",
            "wake-up p99 on a waiting Work stream, Accept answered -> event pushed, five runs",
            "<= 5 ms in every run",
            _runs(WORK_WAKEUP, "p99_ms", "{:.2f} ms"),
            Bar(5.0, at_most=True),
        ),
    ]
