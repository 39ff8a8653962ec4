"""The page's flow-control section (issue 28): how each figure was measured, and what the ledger showed.

Only what the run stored: a figure not measured is named with its reason.
"""

from __future__ import annotations

from typing import Any

from bench.flow_workers import EMPTY_PAUSE_S
from bench.phases.flow import DRAIN_NONE, DRAIN_RULES, FAIRNESS, IN_FLIGHT, PLAN, RATE, UNMEASURED
from bench.phases.flow_baseline import BEFORE, FAIR

NAMES = (FAIRNESS, PLAN, IN_FLIGHT, RATE, DRAIN_NONE, DRAIN_RULES, FAIR, BEFORE)


def flow(bench: dict[str, Any]) -> list[str]:
    figs = bench["figures"]
    unmeasured: dict[str, str] = bench.get(UNMEASURED) or {}
    if not any(name in figs for name in NAMES) and not unmeasured:
        return []
    out = [
        "## Flow control",
        "",
        "- Rules are written straight into `inbox_flow_rules` as SetFlowControl writes them (the pattern's LIKE "
        "form, its specificity), and removed after each figure with their token buckets.",
        "- The max_in_flight and rate figures run against a server of 4 processes (`--workers 4`), driven by 16 "
        "grpc.aio workers in this process, each on its own connection: Claim 10 on the one namespace, "
        f"CompleteBatch of what it was handed, and after an empty answer a {EMPTY_PAUSE_S * 1000:g} ms pause and "
        "again (an empty answer under a rule means not now, not drained). Every count is read afterwards from "
        "`inbox_claims`: a claim's interval is its claimed_at to its ended_at.",
        "- Ledger times are each statement's transaction start, not its commit: a lease given back and the one "
        "that took its slot can look as if they overlapped for the length of a statement. The max_in_flight row "
        "says for how long the count stood above the limit, so such a skew (a fraction of a millisecond) can be "
        "told from a real excess (a round trip or more).",
        "- Fairness: the noisy namespace's events are accepted through AcceptBatch, then the quiet one's 10; one "
        "worker Claims with no namespaces (every namespace), 10 at a time, completing each batch, until it has "
        "the quiet one's 10.",
        "",
    ]
    if IN_FLIGHT in figs:
        f = figs[IN_FLIGHT]
        out.append(
            f"max_in_flight {f['max_in_flight']}: {f['claims']:,} claims of {f['events']:,} events, "
            f"{f['empty_claims']:,} Claims answered empty, {f['seconds']:.1f} s; above the limit for "
            f"{f['seconds_above_limit'] * 1000:.3f} ms in all, in {f.get('stretches_above_limit', '?')} stretches, "
            f"the longest {f.get('longest_above_limit_s', 0.0) * 1000:.3f} ms."
        )
        out.append("")
    if RATE in figs:
        f = figs[RATE]
        counts = ", ".join(str(c) for c in f["per_second"])
        out += [f"Rate {f['rate']:g}/s, events handed out in each second of the window: {counts}.", ""]
    if FAIR in figs and BEFORE in figs:
        a, b = figs[FAIR], figs[BEFORE]
        out += [
            f"Fair ÷ before, windows in the order {a['order']} (A: {a['statement']}; B: {b['statement']}): A "
            f"{', '.join(f'{w:,.0f}' for w in a['windows'])} rows/s; B {', '.join(f'{w:,.0f}' for w in b['windows'])} "
            "rows/s.",
            "",
        ]
    if PLAN in figs:
        g = figs[PLAN]["generic"]
        out += [
            f"The generic plan of a Claim over every namespace ({figs[PLAN]['namespaces']:,} namespaces with "
            f"backlog), {g['execution_ms']:.2f} ms (the median of {len(g.get('samples_ms') or [0])} runs), "
            f"{g['rows_read']:,} rows read, {g['buffers']:,} buffers (the last run's plan):",
            "",
            "```",
            g["plan"],
            "```",
            "",
        ]
    for name, why in unmeasured.items():
        out += [f"`{name}` not measured: `{why}`", ""]
    return out
