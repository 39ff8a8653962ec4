"""The page's tracing section (issue 31): how the three servers were run, and each one's windows.

Only what the run stored: a figure not measured is named with its reason.
"""

from __future__ import annotations

from typing import Any

from bench.figures import cpu_line, per_unit_line
from bench.phases.tracing import BEFORE_COMMIT, CHECKOUT, NAMES, ON, ON_ENV, UNMEASURED, figure_name


def tracing(bench: dict[str, Any]) -> list[str]:
    figs = bench["figures"]
    unmeasured: dict[str, str] = bench.get(UNMEASURED) or {}
    if not any(name in figs for name in NAMES) and not unmeasured:
        return []
    checkout = bench.get(CHECKOUT) or {}
    imported = checkout.get("imported", {}).get("inboxd", "?")
    settings = ", ".join(f"`{k}={v}`" for k, v in ON_ENV.items())
    out = [
        "## Tracing",
        "",
        f"- Three servers on the same database, each a fresh `inboxd serve` (one process) per window: A, the "
        f"server of {BEFORE_COMMIT} (the last commit before tracing), from a detached `git worktree` of its own, "
        f"run with PYTHONPATH naming its server/ and clients/python/src (its interpreter imported inboxd from "
        f"`{imported}`); B, this tree's with no OTEL_* variable; C, this tree's with "
        f"`OTEL_EXPORTER_OTLP_ENDPOINT` naming a sink and {settings} (a queue no load fills, so no span is dropped).",
        "- The sink is the OTLP/gRPC TraceService (opentelemetry-proto) in a process of its own "
        "(bench/otlp_sink.py): it decodes each export, counts the spans and drops them; its CPU is its own part, "
        "not the server's. The exporter's work (the batch processor's thread, encoding, the gRPC call) is in the "
        "server process and so in its CPU.",
        "- Each window: Accept at 64 callers (the accept phase's Node load, no traceparent sent: each Accept span "
        "is a root), then the drain (the work phase's Node load) over a fresh backlog whose events carry a stored "
        "traceparent, so a traced server makes each event's hand-out span. Windows A B C C B A, so every server "
        "meets early and late moments of the run alike; a figure is its windows' calls (events) over their "
        "seconds, CPU summed; p50 and p99 are the worst window's.",
        "- Spans received: what the sink counted while each load ran, warm-up included (the batch processor "
        "sends 512 at a time, so a count may lag by up to a batch); the traced servers flush the rest as they stop.",
        "- There is no raw-PostgreSQL baseline here: each comparison is inboxd against inboxd.",
        "",
        "| figure | windows (rate) | rate | p99 (worst window) | CPU (% of a core) | CPU per unit | spans received |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in NAMES:
        f = figs.get(name)
        if not f:
            continue
        windows = ", ".join(f"{w['value']:,.0f}" for w in f.get("windows", []))
        spans = f"{f['spans_received']:,}" if "spans_received" in f else "-"
        out.append(
            f"| `{name}` | {windows} | {f['value']:,.0f} {f['unit']} | {f['p99_ms']:.2f} ms | {cpu_line(f)} | "
            f"{per_unit_line(f)} | {spans} |"
        )
    out.append("")
    traced = figs.get(figure_name("accept", ON)) or {}
    if traced.get("spans_server_sent"):
        out += [f"The traced servers sent {traced['spans_server_sent']:,} spans from start to stop, all windows.", ""]
    for name, why in unmeasured.items():
        out += [f"`{name}` not measured: `{why}`", ""]
    return out
