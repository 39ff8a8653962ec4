"""The page's bulk-operations section (issue 30): how the replay was measured, and what the audit rows showed.

Only what the run stored: a figure not measured is named with its reason.
"""

from __future__ import annotations

from typing import Any

from bench.figures import cpu_line
from bench.phases.bulk import BATCH, CLAIM_DURING, CLAIM_IDLE, NAMES, RATE, UNMEASURED


def bulk(bench: dict[str, Any]) -> list[str]:
    figs = bench["figures"]
    unmeasured: dict[str, str] = bench.get(UNMEASURED) or {}
    if not any(name in figs for name in NAMES) and not unmeasured:
        return []
    c = bench["config"]
    out = [
        "## Bulk operations",
        "",
        f"- {c.get('bulk_events', 50_000):,} dead letters are written straight into `inbox_events` as a permanent "
        "Fail leaves them (DEAD_LETTERED, attempts spent, `last_error` set, no claim), in a namespace of their own; "
        f"one `StartBulkOperation` REPLAY over the admin API, filtered by namespace and error, at rate "
        f"{c.get('bulk_rate', 2000.0):,.0f}/s, carried by the server's own bulk runner (chunks of a quarter "
        "second's worth, each paced after the one before it).",
        "- The rate is GetBulkOperation's done ÷ (finished_at - started_at): the whole run, the matching at the "
        "start included. Beside it, the rate between the first and the last chunk's audit rows (each row carries "
        "its chunk's transaction time, so that span holds every chunk but the last). There is no raw-PostgreSQL "
        "baseline for the rate: it is a pace the runner keeps, not a speed, and raw SQL has no pace to compare.",
        "- Events changed are counted from `inbox_replays` rows naming the operation: rows, and distinct events.",
        f"- Claims: {c.get('bulk_claimers', 8)} grpc.aio callers in this process on one connection, Claim "
        f"{BATCH} of another namespace's PENDING backlog ({c.get('bulk_claim_backlog', 300_000):,} events, no "
        "wait) then CompleteBatch of what it handed out; idle is a window before the operation starts, during is "
        "from its start until it was seen ended. The latency is the Claim's alone. The p99 ratio compares inboxd "
        "with itself, so it has no raw baseline either.",
        "",
    ]
    if RATE in figs:
        f = figs[RATE]
        counts = ", ".join(f"{n:,}" for n in f["per_second"])
        out += [
            f"Events replayed in each second from the first chunk (audit rows): {counts}. The first chunk's rows "
            f"are {f.get('first_chunk_after_s') or 0.0:.2f} s after the operation's start (numbering its matches, "
            "then the runner's first chunk), time the whole-run rate counts and the audit rows' rate does not. "
            "The replayed events come "
            f"due over {f['due_spread_s']:.1f} s (the spread of their due_at), so they become claimable at the "
            "rate, not at once.",
            "",
        ]
    if CLAIM_IDLE in figs and CLAIM_DURING in figs:
        out += [
            "| Claims | calls | calls/s | p50 | p90 | p99 | max | CPU (% of a core) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for label, name in (("idle", CLAIM_IDLE), ("during the replay", CLAIM_DURING)):
            f = figs[name]
            out.append(
                f"| {label} | {f['ops']:,} | {f['calls_per_s']:,.0f} | {f['p50_ms']:.2f} ms | {f['p90_ms']:.2f} ms | "
                f"{f['p99_ms']:.2f} ms | {f['max_ms']:.2f} ms | {cpu_line(f)} |"
            )
        out.append("")
    for name, why in unmeasured.items():
        out += [f"`{name}` not measured: `{why}`", ""]
    return out
