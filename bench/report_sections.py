"""The sections of docs/benchmarks.md below the targets: every figure, as measured."""

from __future__ import annotations

from typing import Any

from bench.figures import Figures, cpu_line, pairs, per_unit_line, shown_value, top_concurrency
from bench.record import per_op_us
from bench.run import NOISY_PERCENT
from bench.workload import PAYLOAD


def generator(bench: dict[str, Any]) -> list[str]:
    figs: Figures = bench["figures"]
    out = [
        "## The load generator",
        "",
        "Every inboxd throughput figure is driven by `bench/loadgen/loadgen.mjs` (Node; gRPC framed by hand on "
        "node:http2 with the contract's own serializers, or @grpc/grpc-js; several connections), except where "
        "the tables say `python`. Its CPU per call is its own account (`process.cpuUsage`, all threads) over "
        "the measured window; the server's is from /proc.",
        "",
        "| figure | generator | generator CPU per call | server CPU per call | generator ÷ server |",
        "|---|---|---|---|---|",
    ]
    for name, fig in figs.items():
        gen = fig.get("generator_cpu_us_per_op")
        if not name.startswith("inboxd.") or gen is None:
            continue
        server = per_op_us(fig, "server")
        share = f"{gen / server:.2f}x" if server else "-"
        shown_server = f"{server:,.0f} µs" if server else "-"
        out.append(f"| `{name}` | {fig.get('generator', '-')} | {gen:,.0f} µs | {shown_server} | {share} |")
    return [*out, ""]


def pairs_table(bench: dict[str, Any]) -> list[str]:
    figs: Figures = bench["figures"]
    out = [
        "## inboxd against raw PostgreSQL",
        "",
        "Every inboxd figure beside the same database work done straight through psycopg, at the same "
        "concurrency, on the same cluster, measured right before it.",
        "",
        "| measurement | raw PostgreSQL | baseline work | inboxd | inboxd ÷ raw |",
        "|---|---|---|---|---|",
    ]
    for p in pairs(top_concurrency(bench)):
        inboxd, rawfig = figs.get(p.inboxd), figs.get(p.raw) if p.raw else None
        if inboxd is None:
            continue
        ratio = f"{inboxd['value'] / rawfig['value']:.2f}x" if rawfig and rawfig["value"] else "-"
        out.append(f"| {p.label} | {shown_value(rawfig)} | {p.raw_label} | {shown_value(inboxd)} | {ratio} |")
    return [*out, ""]


def cpu_table(bench: dict[str, Any]) -> list[str]:
    m = bench["machine"]
    out = [
        "## Where the CPU went",
        "",
        "Latency is per request as the caller saw it (a Claim step is the Claim plus its completions). CPU is "
        "each part's CPU time over the window in % of one core: `server` (all its processes), `postgres`, "
        "`loadgen` (the Node generator), `client` (this Python process: the raw baseline's and the peers' "
        f"callers), `other` (everything else on the machine, the kernel included). The machine has "
        f"{m['nproc']} cores, so {m['nproc'] * 100}% is everything. Per unit: per row for rows/s figures, per "
        "call otherwise.",
        "",
        "| figure | rate | p50 | p99 | CPU (% of a core) | CPU per unit | errors |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, fig in bench["figures"].items():
        if fig.get("unit") not in ("tx/s", "rows/s") or not fig.get("cpu"):
            continue
        errors = f"{fig['errors']} (first: {fig['first_error']})" if fig["errors"] else "0"
        out.append(
            f"| `{name}` | {shown_value(fig)} | {fig['p50_ms']:.2f} ms | {fig['p99_ms']:.2f} ms | {cpu_line(fig)} "
            f"| {per_unit_line(fig)} | {errors} |"
        )
    return [*out, ""]


def waiting(bench: dict[str, Any]) -> list[str]:
    figs: Figures = bench["figures"]
    out: list[str] = []
    plans = bench.get("plans")
    if plans:
        out += [
            f"## A Claim beside another namespace's backlog of {plans['backlog_rows']:,} PENDING events",
            "",
            "inboxd's claim statement on an empty namespace, prepared as psycopg prepares it, run with "
            "`EXPLAIN (ANALYZE, BUFFERS)` under each `plan_cache_mode` in a transaction rolled back afterwards. "
            "Rows read: rows every table scan returned or filtered out, times its loops.",
            "",
            "| plan | execution | planning | rows read | buffers |",
            "|---|---|---|---|---|",
        ]
        for mode in ("generic", "custom"):
            p = plans[mode]
            out.append(
                f"| {mode} | {p['execution_ms']:.3f} ms | {p['planning_ms']:.3f} ms | {p['rows_read']:,} | "
                f"{p['buffers']:,} |"
            )
        out += ["", "The generic plan:", "", "```", plans["generic"]["plan"], "```", ""]
    wake = figs.get("inboxd.wakeup")
    if wake:
        out += [
            "## Wake-up latency",
            "",
            "From an Accept's answer to the answer of a Claim (wait 10 s) that was waiting for it, grpc.aio "
            f"callers in this process, consecutive runs on one server, beside {wake['backlog_rows']:,} PENDING "
            "events of another namespace.",
            "",
            "| run | rounds | p50 | p90 | p99 | max | other processes |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in wake["runs"]:
            cpu = r.get("cpu") or {}
            other = 100 * cpu["used"].get("other", 0.0) / cpu["seconds"] if cpu.get("seconds") else 0.0
            out.append(
                f"| {r['run']} | {r['rounds']} | {r['p50_ms']:.2f} ms | {r['p90_ms']:.2f} ms | {r['p99_ms']:.2f} ms "
                f"| {r['max_ms']:.2f} ms | {other:.0f}% of a core |"
            )
        out.append("")
    lp = figs.get("inboxd.longpolls")
    if lp:
        ended = ", ".join(f"{k} {v}" for k, v in lp["ended_early"].items()) or "none"
        out += [
            "## Idle long-polls",
            "",
            f"A fresh server holding {lp['waiting']:,} Claims (wait {lp.get('wait_seconds', 30)} s) on an empty "
            "namespace, nothing else in the table, sampled once they all wait and their first looks have reached "
            "pg_stat_database.",
            "",
            "| server CPU | PostgreSQL CPU | database transactions | server RSS | idle RSS | peak RSS | "
            "calls that ended early |",
            "|---|---|---|---|---|---|---|",
            f"| {lp['server_cpu_percent']:.1f}% of a core | {lp['postgres_cpu_percent']:.1f}% of a core | "
            f"{lp['db_transactions_per_s']:,.1f} /s | {lp['rss_mb']:.0f} MB | {lp['idle_rss_mb']:.0f} MB | "
            f"{lp['peak_rss_mb']:.0f} MB | {ended} |",
            "",
        ]
    return out


def history(bench: dict[str, Any]) -> list[str]:
    hist = bench.get("history")
    if not hist:
        return []
    figs: Figures = bench["figures"]
    out = [
        f"## Cost as history grows: {hist['rows']:,} COMPLETED rows",
        "",
        f"Loaded with one `INSERT ... SELECT generate_series` in {hist['insert_s']:.0f} s, then `VACUUM (ANALYZE)` "
        f"in {hist['vacuum_analyze_s']:.0f} s; inbox_events then held {hist['table_total_mb']:,.0f} MB "
        f"({hist['heap_mb']:,.0f} MB heap). The Stats gauge's query took {hist['stats_query_s']:.2f} s over it.",
        "",
        "| figure | rate | dead tuples after | autovacuums during | autoanalyzes during |",
        "|---|---|---|---|---|",
    ]
    for name in ("raw.claim10", "inboxd.claim10", "raw.claim10.history", "inboxd.claim10.history"):
        table = figs.get(name, {}).get("table")
        if table:
            out.append(
                f"| `{name}` | {shown_value(figs[name])} | {table['dead_tuples_after']:,} | {table['autovacuums']} "
                f"| {table['autoanalyzes']} |"
            )
    explain = hist.get("explain")
    if explain:
        out += [
            "",
            f"The claim (max_events 10, pending rows present) over the history, custom plan: "
            f"{explain['execution_ms']:.2f} ms, {explain['rows_read']:,} rows read.",
            "",
            "```",
            explain["plan"],
            "```",
        ]
    return [*out, ""]


def method(bench: dict[str, Any] | None, peers: dict[str, Any] | None) -> list[str]:
    ref = bench or peers
    if ref is None:
        return []
    cfg, m, pg = ref["config"], ref["machine"], ref["postgres"]
    settings = ", ".join(f"{k}={v}" for k, v in pg.items())
    versions = ", ".join(f"{k} {v}" for k, v in ref["versions"].items())
    return [
        "## Machine",
        "",
        f"- {m['nproc']} cores ({m['cpu']}), {m['memory_gib']} GiB memory, Linux {m['kernel']}",
        f"- PostgreSQL: {settings}",
        f"- Python {ref.get('python', '?')}, {versions}; this process's event loop: {ref['loop']}",
        "",
        "## Method",
        "",
        "- `make bench` starts its own PostgreSQL (fsync and synchronous_commit on) in a fresh folder under /tmp "
        "and deletes it afterwards. It migrates inboxd's schema into `inboxd` (served by a real `python -m "
        "inboxd serve` subprocess, `--workers 1` when the server has the flag) and `inboxd_raw` (the raw "
        "baseline).",
        "- The raw baseline does the database work straight through psycopg from this process: one "
        "AsyncConnection per client, autocommit. Each INSERT writes a row as inboxd's own does since migration "
        "0019: the payload's bytes into `raw_payload`, sent as a binary bytea parameter that nobody parses, the "
        "jsonb `payload` left NULL and `content_type` at its default (`application/json`, what inboxd stores for "
        "this payload). A single Accept is `INSERT ... ON CONFLICT DO NOTHING` of one row; AcceptBatch one "
        "100-row `INSERT ... SELECT FROM unnest(...)` of keys (binary text[]) and payloads (binary bytea[], one "
        "element per row, as inboxd's group insert sends them); duplicates the same INSERT of stored "
        "keys, and again with `pg_logical_emit_message(true, ...)` in the statement, which a repeat needs to be "
        "as durable as the first (its COMMIT flushes, and would wait for a synchronous standby). "
        "Claims run inboxd's own claim statement, then one fenced `UPDATE ... FROM unnest(...)` completes "
        "what it returned (one event or ten) and ends the claims.",
        f"- Throughput is a closed loop: each caller sends its next request when the last is answered; "
        f"{cfg['warmup']:g} s of warm-up, then a {cfg['duration']:g} s window. A CHECKPOINT runs before each "
        f"window; {_retries(cfg.get('noisy_retries'))}",
        f"- Accept: {', '.join(str(c) for c in cfg['concurrency'])} callers, unique keys, a {len(PAYLOAD)}-byte "
        f"JSON payload; AcceptBatch: {cfg['batch_clients']} callers of {cfg['batch_rows']} events; duplicates: "
        "each generator thread stores its keys first, then every call in the window repeats one.",
        f"- Claims: {cfg['claim_workers']} no-op workers over {cfg['claim_prefill']:,} pending events inserted "
        f"beforehand (their payloads in `raw_payload`, as Accept stores them); each window follows "
        f"{cfg['prime']:g} s of the same workload unmeasured and a `VACUUM (ANALYZE)`. The first-seconds figure "
        "skips all that: a database the server migrated itself, filled, and "
        f"measured from the first claim for {cfg['cold_window']:g} s.",
        f"- Wake-up: {cfg['wake_runs']} runs of {cfg['wake_rounds']} rounds after 10 unmeasured ones; long-polls: "
        f"{cfg['long_polls']:,} Claims over {cfg['long_poll_channels']} channels, sampled for "
        f"{cfg['long_poll_sample']:g} s; database transactions are the delta of pg_stat_database "
        "xact_commit + xact_rollback.",
        f"- History: {cfg['history_rows']:,} COMPLETED rows bulk-inserted, then Claim 10 -> Complete for inboxd "
        "and for the raw baseline over the same rows.",
        "- Not measured here: TLS, auth tokens, several hosts, payloads other than the one above.",
        "",
    ]


def _retries(retries: int | None) -> str:
    """How a noisy window was handled, from the run's own setting (older results did not store it)."""
    if retries is None:
        return f"a window in which other processes took {NOISY_PERCENT:.0f}% of a core or more may be measured again."
    if retries == 0:
        return "each window is measured once, however busy the machine."
    times, kept = ("once", "quieter") if retries == 1 else (f"up to {retries} times", "quietest")
    return (
        f"a window in which other processes took {NOISY_PERCENT:.0f}% of a core or more is measured again {times}, "
        f"and the {kept} attempt kept."
    )
