"""What the figures mean: which inboxd figure is compared with which, the targets, and the console table."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Figures = dict[str, dict[str, Any]]

# Above this share of one core used by processes that are not ours, a window is called noisy.
NOISY_PERCENT = 20.0


@dataclass(frozen=True)
class Pair:
    """One inboxd figure and the raw figure it is divided by."""

    label: str
    inboxd: str
    raw: str | None
    raw_label: str


def pairs(top: int) -> list[Pair]:
    return [
        Pair("Accept, 1 caller", "inboxd.accept.c1", "raw.insert.c1", "single-row INSERT, 1 client"),
        Pair("Accept, 16 callers", "inboxd.accept.c16", "raw.insert.c16", "single-row INSERT, 16 clients"),
        Pair(
            f"Accept, {top} callers", f"inboxd.accept.c{top}", f"raw.insert.c{top}", f"single-row INSERT, {top} clients"
        ),
        Pair(
            f"Empty RPC (grpc.health Check), {top} callers",
            f"inboxd.empty_rpc.c{top}",
            f"raw.insert.c{top}",
            f"single-row INSERT, {top} clients (for scale)",
        ),
        Pair("AcceptBatch of 100, 16 callers", "inboxd.accept_batch", "raw.insert_batch", "100-row INSERT, 16 clients"),
        Pair(
            f"Accept of duplicates, {top} callers",
            f"inboxd.duplicate.c{top}",
            f"raw.duplicate.c{top}",
            f"INSERT of existing keys, {top} clients",
        ),
        Pair("Claim -> Complete, batch 1, 16 workers", "inboxd.claim1", "raw.claim1", "claim 1, complete 1"),
        Pair(
            "Claim -> Complete, batch 10, 16 workers",
            "inboxd.claim10",
            "raw.claim10",
            "claim 10, complete 10 in one statement",
        ),
        Pair(
            "Claim -> Complete, batch 10, 5M completed rows",
            "inboxd.claim10.history",
            "raw.claim10.history",
            "the same, over the same 5M rows",
        ),
    ]


@dataclass(frozen=True)
class Target:
    label: str
    wanted: str
    measured: Callable[[Figures, dict[str, Any] | None], float | None]
    shown: Callable[[float], str]
    met: Callable[[float], bool]
    # The figure whose CPU split explains a miss.
    explain_with: str | None = None


def _ratio(a: str, b: str) -> Callable[[Figures, dict[str, Any] | None], float | None]:
    def measured(figs: Figures, _peers: dict[str, Any] | None) -> float | None:
        if a in figs and b in figs and figs[b]["value"]:
            return float(figs[a]["value"]) / float(figs[b]["value"])
        return None

    return measured


def _field(name: str, key: str) -> Callable[[Figures, dict[str, Any] | None], float | None]:
    def measured(figs: Figures, _peers: dict[str, Any] | None) -> float | None:
        return float(figs[name][key]) if name in figs else None

    return measured


def _over_best_peer(_figs: Figures, peers: dict[str, Any] | None) -> float | None:
    if not peers:
        return None
    rates = peer_rates(peers)
    best = max((v for k, v in rates.items() if k != "inboxd"), default=0.0)
    return rates.get("inboxd", 0.0) / best if best else None


def targets(top: int) -> list[Target]:
    times = "{:.2f}x".format
    return [
        Target(
            f"Accept, {top} concurrent single-event callers",
            f">= 1.5x raw single-row INSERT tx/s at {top} clients",
            _ratio(f"inboxd.accept.c{top}", f"raw.insert.c{top}"),
            times,
            lambda v: v >= 1.5,
            f"inboxd.accept.c{top}",
        ),
        Target(
            "AcceptBatch of 100",
            ">= 0.7x raw 100-row INSERT rows/s",
            _ratio("inboxd.accept_batch", "raw.insert_batch"),
            times,
            lambda v: v >= 0.7,
            "inboxd.accept_batch",
        ),
        Target(
            "Claim -> Complete, batch 10",
            ">= 0.7x raw claim-10-then-complete rows/s",
            _ratio("inboxd.claim10", "raw.claim10"),
            times,
            lambda v: v >= 0.7,
            "inboxd.claim10",
        ),
        Target(
            "Claim -> Complete, batch 10, beside peers",
            ">= 2x the better of PgQueuer and Procrastinate (make bench-peers)",
            _over_best_peer,
            times,
            lambda v: v >= 2.0,
        ),
        Target(
            "Wake-up latency p50",
            "<= 5 ms",
            _field("inboxd.wakeup", "p50_ms"),
            "{:.2f} ms".format,
            lambda v: v <= 5.0,
        ),
        Target(
            "Wake-up latency p99",
            "<= 50 ms",
            _field("inboxd.wakeup", "p99_ms"),
            "{:.2f} ms".format,
            lambda v: v <= 50.0,
        ),
        Target(
            "Claim -> Complete with 5M completed rows",
            ">= 0.9x the empty-table figure",
            _ratio("inboxd.claim10.history", "inboxd.claim10"),
            times,
            lambda v: v >= 0.9,
            "inboxd.claim10.history",
        ),
        Target(
            "Server RSS, 5,000 waiting long-polls",
            "<= 300 MB",
            _field("inboxd.longpolls", "rss_mb"),
            "{:.0f} MB".format,
            lambda v: v <= 300.0,
        ),
    ]


def peer_rates(peers: dict[str, Any]) -> dict[str, float]:
    """Mean jobs/s per system over the rounds."""
    found: dict[str, list[float]] = {}
    for r in peers.get("rounds", []):
        found.setdefault(r["system"], []).append(float(r["jobs_per_s"]))
    return {k: sum(v) / len(v) for k, v in found.items()}


def top_concurrency(bench: dict[str, Any]) -> int:
    return int(max(bench["config"]["concurrency"]))


def shown_value(fig: dict[str, Any] | None) -> str:
    if fig is None:
        return "-"
    v = float(fig["value"])
    return f"{v:,.0f} {fig['unit']}" if v >= 100 else f"{v:,.1f} {fig['unit']}"


def cpu_line(fig: dict[str, Any]) -> str:
    cpu = fig.get("cpu")
    if not cpu or not cpu["seconds"]:
        return "-"
    parts = []
    for part in ("server", "postgres", "client", "other"):
        if part in cpu["used"]:
            pct = 100 * cpu["used"][part] / cpu["seconds"]
            parts.append(f"{part} {pct:.0f}%")
    return ", ".join(parts)


def per_unit(fig: dict[str, Any], part: str) -> float | None:
    cpu = fig.get("cpu")
    units = fig.get("units") if fig["unit"] == "rows/s" else fig.get("ops")
    if not cpu or not units or part not in cpu["used"]:
        return None
    return 1e6 * float(cpu["used"][part]) / float(units)


# -- the console table --


def console_table(bench: dict[str, Any], peers: dict[str, Any] | None) -> str:
    figs: Figures = bench["figures"]
    lines = [f"{'measurement':48} {'raw PostgreSQL':>18} {'inboxd':>18} {'inboxd/raw':>10}"]
    for p in pairs(top_concurrency(bench)):
        inboxd, rawfig = figs.get(p.inboxd), figs.get(p.raw) if p.raw else None
        ratio = f"{inboxd['value'] / rawfig['value']:.2f}x" if inboxd and rawfig and rawfig["value"] else "-"
        lines.append(f"{p.label:48} {shown_value(rawfig):>18} {shown_value(inboxd):>18} {ratio:>10}")
    lines.append("")
    lines.append(f"{'target':48} {'wanted':>40} {'measured':>10}  met")
    for t in targets(top_concurrency(bench)):
        v = t.measured(figs, peers)
        shown = t.shown(v) if v is not None else "-"
        verdict = "-" if v is None else ("yes" if t.met(v) else "NO")
        lines.append(f"{t.label:48} {t.wanted:>40} {shown:>10}  {verdict}")
    return "\n".join(lines)


def console_peers(peers: dict[str, Any]) -> str:
    rates = peer_rates(peers)
    lines = [f"{'system':16} {'jobs/s (mean)':>14}   rounds"]
    for system, rate in rates.items():
        each = ", ".join(f"{r['jobs_per_s']:,.0f}" for r in peers["rounds"] if r["system"] == system)
        lines.append(f"{system:16} {rate:>14,.0f}   {each}")
    return "\n".join(lines)
