"""The targets of issues 13 and 14, each a figure (mostly a ratio) of one run, with its bar.

Issue 27's are in stream_targets.py, 29's in raw_body_targets.py, 28's in flow_targets.py, 30's in
bulk_targets.py, 31's in tracing_targets.py, 44's in edge_targets.py, 47's against the peers in
peer_targets.py.

A target that could not be measured says why (the server lacks a feature, or
`make bench-peers` has not run) and has no value: never a number that was not
measured.
"""

from __future__ import annotations

from collections.abc import Callable

from bench.figures import Figures
from bench.support import COMPLETE_BATCH, WORKERS

# What a target is, and the shared measures, stand below this module and every *_targets.py (no circle);
# named here still, where the report, the chart and the tests find them.
from bench.target_kinds import (
    Bar,
    Measured,
    Results,
    Target,
    _batched_event_cpu,
    _cpu_ratio,
    _generator_share,
    _Ratio,
    better_peer,
)

WAKEUP_P99_MS = Bar(10.0, at_most=True)
DRAIN_OVER_PEER = Bar(2.0)


def _enqueue_over_peer(bench: Results, peers: Results | None) -> Measured:
    if peers is None:
        return Measured(None, missing="not measured: run `make bench-peers`")
    top = max(peers["config"]["peer_enqueue_callers"])
    figs: Figures = peers["figures"]
    rates = {
        system: float(figs[f"enqueue.{system}.single.c{top}"]["value"])
        for system in ("inboxd", "pgqueuer", "procrastinate", "pg-boss", "graphile-worker")
        if f"enqueue.{system}.single.c{top}" in figs
    }
    best = better_peer(rates)
    if "inboxd" not in rates or best is None or not best[1]:
        return Measured(None, missing="not measured in the peers run")
    v = rates["inboxd"] / best[1]
    return Measured(v, f"{v:.2f}x ({rates['inboxd']:,.0f} ÷ {best[0]} {best[1]:,.0f} tx/s, {top} callers)")


def _drain_over_peer(bench: Results, peers: Results | None) -> Measured:
    if peers is None or not peers.get("rounds"):
        return Measured(None, missing="not measured: run `make bench-peers`")
    from bench.figures import peer_rates

    rates = peer_rates(peers)
    best = better_peer(rates)
    if "inboxd" not in rates or best is None or not best[1]:
        return Measured(None, missing="not measured in the peers run")
    v = rates["inboxd"] / best[1]
    return Measured(v, f"{v:.2f}x ({rates['inboxd']:,.0f} ÷ {best[0]} {best[1]:,.0f} jobs/s)")


def _longpoll(key: str, fmt: str) -> Callable[[Results, Results | None], Measured]:
    def measure(bench: Results, _peers: Results | None) -> Measured:
        lp = bench["figures"].get("inboxd.longpolls")
        if not lp:
            return Measured(None, missing="not measured")
        return Measured(float(lp[key]), fmt.format(float(lp[key])))

    return measure


def _wakeup_runs(bench: Results, _peers: Results | None) -> Measured:
    wake = bench["figures"].get("inboxd.wakeup")
    if not wake or not wake.get("runs"):
        return Measured(None, missing="not measured")
    p99s = [float(r["p99_ms"]) for r in wake["runs"]]
    return Measured(max(p99s), "p99 " + ", ".join(f"{v:.1f}" for v in p99s) + " ms")


def _wakeup_p50(bench: Results, _peers: Results | None) -> Measured:
    wake = bench["figures"].get("inboxd.wakeup")
    if not wake:
        return Measured(None, missing="not measured")
    return Measured(float(wake["p50_ms"]), f"{wake['p50_ms']:.2f} ms (the highest run)")


def _generic_plan(bench: Results, _peers: Results | None) -> Measured:
    plan = bench.get("plans", {}).get("generic")
    if not plan:
        return Measured(None, missing="not measured")
    return Measured(
        float(plan["execution_ms"]),
        f"{plan['execution_ms']:.2f} ms, {plan['rows_read']:,} rows read",
    )


def _accept_bar(bench: Results, top: int) -> tuple[float, str]:
    """Issue 13's bar for Accept ÷ empty RPC, and its wording: the bar hangs on a figure of the same run.

    0.8x while the generator's CPU per call is below the server's (a target of its own), 0.6x otherwise.
    """
    share = _generator_share(f"inboxd.empty_rpc.c{top}")(bench, None).value
    if share is None:
        return 0.8, ">= 0.8x (0.6x if the generator's CPU per call is not below the server's: not measured)"
    if share < 1.0:
        return 0.8, f">= 0.8x (the bar while the generator's CPU per call is below the server's: {share:.2f}x)"
    return 0.6, f">= 0.6x (the bar while the generator's CPU per call is not below the server's: {share:.2f}x)"


def targets(bench: Results) -> list[Target]:
    # Imported here still: a *_targets.py begun against bench.targets (before target_kinds) stays importable,
    # a circle `make layers` names rather than an ImportError.
    from bench.bulk_targets import bulk_targets
    from bench.edge_targets import edge_targets
    from bench.fanout_targets import fanout_targets
    from bench.flow_targets import flow_targets
    from bench.peer_targets import peer_targets
    from bench.raw_body_targets import raw_body_targets
    from bench.stream_targets import stream_targets
    from bench.tracing_targets import tracing_targets

    c = bench["config"]
    top = max(c["concurrency"])
    accept_bar, accept_wanted = _accept_bar(bench, top)
    return [
        Target(
            "13",
            f"Accept at {top} callers ÷ empty-RPC rate (same generator, same callers)",
            accept_wanted,
            _Ratio(f"inboxd.accept.c{top}", f"inboxd.empty_rpc.c{top}"),
            Bar(accept_bar),
            (f"inboxd.accept.c{top}", f"inboxd.empty_rpc.c{top}"),
            "accept",
        ),
        Target(
            "13",
            "server CPU per Accept ÷ server CPU per empty RPC",
            "<= 1.5x",
            _cpu_ratio(f"inboxd.accept.c{top}", f"inboxd.empty_rpc.c{top}"),
            Bar(1.5, at_most=True),
            (f"inboxd.accept.c{top}",),
            "accept",
        ),
        Target(
            "13",
            f"AcceptBatch of {c['batch_rows']} ÷ raw {c['batch_rows']}-row INSERT",
            ">= 0.5x",
            _Ratio("inboxd.accept_batch", "raw.insert_batch"),
            Bar(0.5),
            ("inboxd.accept_batch", "raw.insert_batch"),
            "accept_batch",
        ),
        Target(
            "13",
            "server CPU per batched event",
            "<= 20 µs",
            _batched_event_cpu,
            Bar(20.0, at_most=True),
            ("inboxd.accept_batch",),
            "accept_batch",
        ),
        Target(
            "13",
            f"single-event Accept ÷ the best peer's single enqueue, {top} callers (make bench-peers)",
            ">= 1.5x",
            _enqueue_over_peer,
            Bar(1.5),
        ),
        Target(
            "13",
            f"`--workers 2` ÷ `--workers 1`, Accept at {top} callers",
            ">= 1.0x",
            _Ratio(f"inboxd.accept.c{top}.workers2", f"inboxd.accept.c{top}", WORKERS),
            Bar(1.0),
            (f"inboxd.accept.c{top}.workers2", f"inboxd.accept.c{top}"),
        ),
        Target(
            "13",
            f"load generator CPU per call ÷ server CPU per call, empty RPC at {top} callers",
            "< 1.0x",
            _generator_share(f"inboxd.empty_rpc.c{top}"),
            lambda v: v < 1.0,
            (f"inboxd.empty_rpc.c{top}",),
        ),
        Target(
            "14",
            "Claim 10 -> CompleteBatch ÷ raw claim-10-then-complete",
            ">= 0.7x",
            _Ratio("inboxd.claim10.batch", "raw.claim10", COMPLETE_BATCH),
            Bar(0.7),
            ("inboxd.claim10.batch", "raw.claim10"),
            "claim10",
        ),
        Target(
            "14",
            "drain ÷ the best peer's (make bench-peers)",
            ">= 2x (resolve at >= 1.2x with the profile of what remains)",
            _drain_over_peer,
            DRAIN_OVER_PEER,
        ),
        Target(
            "14",
            "Claim 1 -> Complete ÷ raw",
            ">= 0.6x",
            _Ratio("inboxd.claim1", "raw.claim1"),
            Bar(0.6),
            ("inboxd.claim1", "raw.claim1"),
        ),
        Target(
            "14",
            f"{c['long_polls']:,} idle long-polls: server CPU",
            "<= 5% of a core",
            _longpoll("server_cpu_percent", "{:.1f}% of a core"),
            Bar(5.0, at_most=True),
        ),
        Target(
            "14",
            f"{c['long_polls']:,} idle long-polls: database transactions",
            "<= 10 /s",
            _longpoll("db_transactions_per_s", "{:,.1f} /s"),
            Bar(10.0, at_most=True),
        ),
        Target(
            "14",
            f"wake-up p99, {c['wake_runs']} consecutive runs of {c['wake_rounds']} rounds "
            f"(beside {c['backlog_rows']:,} PENDING events of another namespace)",
            "<= 10 ms in every run",
            _wakeup_runs,
            WAKEUP_P99_MS,
        ),
        Target(
            "14",
            f"Claim on an empty namespace beside {c['backlog_rows']:,} PENDING events of another, generic plan",
            "<= 1 ms",
            _generic_plan,
            Bar(1.0, at_most=True),
        ),
        Target(
            "14",
            f"the first {c['cold_window']:g} s after start ÷ steady state, Claim 10 -> Complete",
            ">= 0.8x",
            _Ratio("inboxd.claim10.cold", "inboxd.claim10"),
            Bar(0.8),
            ("inboxd.claim10.cold", "inboxd.claim10"),
        ),
        Target(
            "14",
            f"Claim 10 -> Complete with {c['history_rows']:,} completed rows ÷ empty",
            ">= 0.9x (keep)",
            _Ratio("inboxd.claim10.history", "inboxd.claim10"),
            Bar(0.9),
            ("inboxd.claim10.history", "raw.claim10.history"),
        ),
        Target(
            "10",
            f"server RSS, {c['long_polls']:,} waiting long-polls",
            "<= 300 MB (keep)",
            _longpoll("rss_mb", "{:.0f} MB"),
            Bar(300.0, at_most=True),
        ),
        Target(
            "10",
            "wake-up p50",
            "<= 5 ms (keep)",
            _wakeup_p50,
            Bar(5.0, at_most=True),
        ),
        *stream_targets(bench),
        *raw_body_targets(bench),
        *flow_targets(bench),
        *bulk_targets(bench),
        *tracing_targets(bench),
        *edge_targets(bench),
        *peer_targets(bench),
        *fanout_targets(bench),
    ]


def verdict(t: Target, m: Measured) -> str:
    if m.value is None:
        return "not measured"
    return "yes" if t.met(m.value) else "**no**"


def ratio_bars(bench: Results) -> dict[tuple[str, str], float]:
    """The bar of each target that is one figure of this run over another, by (figure, over figure)."""
    return {
        (t.measure.a, t.measure.b): t.met.value
        for t in targets(bench)
        if isinstance(t.measure, _Ratio) and isinstance(t.met, Bar)
    }
