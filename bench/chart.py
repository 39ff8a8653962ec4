"""docs/benchmarks.png: throughput, ratios against their targets, the peers, and the latencies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.figures import Figures, pairs, peer_rates, top_concurrency
from bench.targets import DRAIN_OVER_PEER, WAKEUP_P99_MS, ratio_bars


def chart(bench: dict[str, Any] | None, peers: dict[str, Any] | None, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(14, 9))
    (ax_rate, ax_ratio), (ax_peers, ax_wake) = axes
    if bench is not None:
        _chart_rates(ax_rate, ax_ratio, bench)
        _chart_wakeup(ax_wake, bench["figures"])
    _chart_peers(ax_peers, peers)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _chart_rates(ax_rate: Any, ax_ratio: Any, bench: dict[str, Any]) -> None:
    figs: Figures = bench["figures"]
    top = top_concurrency(bench)
    shown = [p for p in pairs(top) if p.inboxd in figs]
    labels = [p.label.replace(", ", "\n", 1) for p in shown]
    x = list(range(len(shown)))
    raw_v = [figs[p.raw]["value"] if p.raw and p.raw in figs else 0 for p in shown]
    ib_v = [figs[p.inboxd]["value"] for p in shown]
    ax_rate.bar([i - 0.2 for i in x], raw_v, 0.4, label="raw PostgreSQL", color="#999999")
    ax_rate.bar([i + 0.2 for i in x], ib_v, 0.4, label="inboxd", color="#1f77b4")
    ax_rate.set_yscale("log")
    ax_rate.set_xticks(x, labels, rotation=60, ha="right", fontsize=7)
    ax_rate.set_ylabel("tx/s or rows/s (log)")
    ax_rate.set_title("Throughput")
    ax_rate.legend(fontsize=8)

    ratios = [
        figs[p.inboxd]["value"] / figs[p.raw]["value"] if p.raw in figs and figs[p.raw]["value"] else 0 for p in shown
    ]
    # The targets whose denominator is the raw figure of the same pair (issues 13 and 14).
    bars = ratio_bars(bench)
    wanted = {p.inboxd: bars[p.inboxd, p.raw] for p in shown if p.raw and (p.inboxd, p.raw) in bars}
    colors = [
        ("#2ca02c" if r >= wanted[p.inboxd] else "#d62728") if p.inboxd in wanted else "#1f77b4"
        for p, r in zip(shown, ratios, strict=True)
    ]
    ax_ratio.bar(x, ratios, 0.6, color=colors)
    for i, p in enumerate(shown):
        if p.inboxd in wanted:
            ax_ratio.plot([i - 0.4, i + 0.4], [wanted[p.inboxd]] * 2, color="black", linewidth=2)
    ax_ratio.axhline(1.0, color="#999999", linestyle=":", linewidth=1)
    ax_ratio.set_xticks(x, labels, rotation=60, ha="right", fontsize=7)
    ax_ratio.set_ylabel("inboxd ÷ raw")
    ax_ratio.set_title("inboxd ÷ raw baseline (black bar: target)")


def _chart_wakeup(ax: Any, figs: Figures) -> None:
    wake = figs.get("inboxd.wakeup")
    if not wake or not wake.get("runs"):
        ax.set_axis_off()
        return
    runs = wake["runs"]
    names = [f"run {r['run']}" for r in runs]
    ax.bar([i - 0.2 for i in range(len(runs))], [r["p50_ms"] for r in runs], 0.4, label="p50", color="#9ecae1")
    ax.bar([i + 0.2 for i in range(len(runs))], [r["p99_ms"] for r in runs], 0.4, label="p99", color="#1f77b4")
    ax.axhline(WAKEUP_P99_MS.value, color="black", linewidth=2)
    ax.set_xticks(list(range(len(runs))), names)
    ax.set_ylabel("ms")
    ax.legend(fontsize=8)
    ax.set_title(f"Wake-up latency per run (black line: p99 target, {WAKEUP_P99_MS.value:g} ms)", fontsize=10)


def _chart_peers(ax: Any, peers: dict[str, Any] | None) -> None:
    if peers is None:
        ax.text(0.5, 0.5, "run make bench-peers", ha="center", va="center")
        ax.set_axis_off()
        return
    rates = peer_rates(peers)
    ax.bar(list(rates), list(rates.values()), color=["#1f77b4" if k == "inboxd" else "#999999" for k in rates])
    best = max((v for k, v in rates.items() if k != "inboxd"), default=0.0)
    if best and "inboxd" in rates:
        i = list(rates).index("inboxd")
        bar = DRAIN_OVER_PEER.value * best
        ax.plot([i - 0.4, i + 0.4], [bar] * 2, color="black", linewidth=2)
        ax.annotate(
            f"target: {DRAIN_OVER_PEER.value:g}x the best peer",
            (i, bar),
            textcoords="offset points",
            xytext=(0, 4),
            ha="center",
        )
        ax.set_ylim(0, max([*rates.values(), bar]) * 1.15)
    ax.set_ylabel("jobs/s")
    workers = peers["config"]["claim_workers"]
    ax.set_title(f"End-to-end no-op jobs: {workers} claimers, batch 10 where the library can")
