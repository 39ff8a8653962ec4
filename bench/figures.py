"""Which figure is compared with which, and the small formatting helpers every report section shares."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench.record import percent_of_core, server_us_per

Figures = dict[str, dict[str, Any]]
PARTS = ("server", "postgres", "loadgen", "client", "edge", "bare", "other")


@dataclass(frozen=True)
class Pair:
    """One inboxd figure and the raw figure it is divided by."""

    label: str
    inboxd: str
    raw: str | None
    raw_label: str


def top_concurrency(bench: dict[str, Any]) -> int:
    return int(max(bench["config"]["concurrency"]))


def pairs(top: int) -> list[Pair]:
    return [
        Pair("Accept, 1 caller", "inboxd.accept.c1", "raw.insert.c1", "single-row INSERT, 1 client"),
        Pair("Accept, 16 callers", "inboxd.accept.c16", "raw.insert.c16", "single-row INSERT, 16 clients"),
        Pair(
            f"Accept, {top} callers", f"inboxd.accept.c{top}", f"raw.insert.c{top}", f"single-row INSERT, {top} clients"
        ),
        Pair(
            f"Accept, {top} callers, --workers 2",
            f"inboxd.accept.c{top}.workers2",
            f"raw.insert.c{top}",
            f"single-row INSERT, {top} clients",
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
        Pair(
            f"Accept of duplicates, {top} callers, beside a repeat as durable as the first",
            f"inboxd.duplicate.c{top}",
            f"raw.duplicate_durable.c{top}",
            f"INSERT of existing keys + a transactional WAL message, {top} clients",
        ),
        Pair("Claim 1 -> Complete, 16 workers", "inboxd.claim1", "raw.claim1", "claim 1, complete it"),
        Pair("Claim 10 -> Complete each, 16 workers", "inboxd.claim10", "raw.claim10", "claim 10, complete in one"),
        Pair(
            "Claim 10 -> CompleteBatch, 16 workers", "inboxd.claim10.batch", "raw.claim10", "claim 10, complete in one"
        ),
        Pair(
            "Claim 10 carrying the previous batch's completions, 16 workers",
            "inboxd.claim10.carry",
            "raw.claim10",
            "claim 10, complete in one",
        ),
        Pair(
            "Claim 10 -> Complete each, over 1,000 ordering keys, 16 workers",
            "inboxd.claim10.ordered",
            "raw.claim10",
            "claim 10, complete in one (no ordering keys)",
        ),
        Pair(
            "Claim 10 -> Complete each, first seconds after start",
            "inboxd.claim10.cold",
            "raw.claim10",
            "claim 10, complete in one (primed)",
        ),
        Pair(
            "Claim 10 -> Complete each, over the history",
            "inboxd.claim10.history",
            "raw.claim10.history",
            "the same, over the same rows",
        ),
    ]


def peer_rates(peers: dict[str, Any]) -> dict[str, float]:
    """Mean drain jobs/s per system over the rounds."""
    found: dict[str, list[float]] = {}
    for r in peers.get("rounds", []):
        found.setdefault(r["system"], []).append(float(r["jobs_per_s"]))
    return {k: sum(v) / len(v) for k, v in found.items()}


def shown_value(fig: dict[str, Any] | None) -> str:
    if fig is None:
        return "-"
    if not fig.get("ops", 1):
        return "no call answered in the window"
    v = float(fig["value"])
    return f"{v:,.0f} {fig['unit']}" if v >= 100 else f"{v:,.1f} {fig['unit']}"


def cpu_line(fig: dict[str, Any]) -> str:
    """Each part's CPU over the window, in % of one core."""
    parts = []
    for part in PARTS:
        pct = percent_of_core(fig, part)
        if pct is not None and part in (fig.get("cpu") or {}).get("used", {}):
            parts.append(f"{part} {pct:.0f}%")
    return ", ".join(parts) or "-"


def per_unit_line(fig: dict[str, Any]) -> str:
    """Each part's CPU µs per unit (row or request)."""
    unit = "row" if fig.get("unit") == "rows/s" else "call"
    found = [
        f"{part} {us:,.0f} µs"
        for part in PARTS
        if part != "other" and (us := server_us_per(fig, part)) is not None and us >= 0.5
    ]
    return f"per {unit}: " + ", ".join(found) if found else "-"


def ratio(figs: Figures, a: str, b: str) -> float | None:
    if a in figs and b in figs and figs[b]["value"]:
        return float(figs[a]["value"]) / float(figs[b]["value"])
    return None
