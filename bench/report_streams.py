"""The streams' section of docs/benchmarks.md (issue 27): AcceptStream beside unary Accept, and the Work stream."""

from __future__ import annotations

from typing import Any

from bench.figures import Figures, cpu_line, per_unit_line, shown_value
from bench.phases.idle_streams import WORK_IDLE
from bench.phases.streams import STREAMED, UNARY
from bench.phases.work import CREDIT, RAW_CLAIM10, WORK_CLAIM, WORK_RECOVERY, WORK_WAKEUP
from bench.record import per_op_us


def streams(bench: dict[str, Any]) -> list[str]:
    figs: Figures = bench["figures"]
    if not any(name in figs for name in (STREAMED, WORK_CLAIM, WORK_RECOVERY, WORK_IDLE, WORK_WAKEUP)):
        return []
    out = [
        "## Streams",
        "",
        "AcceptStream and Work driven by the same Node generator as the unary figures (`bench/loadgen/streams.mjs`: "
        "one stream per connection for AcceptStream, one Work stream per worker). The generator's CPU per event is "
        "its own account over the window, beside the server's: where it is not below the server's, the figure "
        "measures the generator as much as the server.",
        "",
        *_method(bench["config"]),
        "",
        "| figure | rate | CPU (% of a core) | CPU per unit | generator CPU per call |",
        "|---|---|---|---|---|",
    ]
    for name in (UNARY, STREAMED, RAW_CLAIM10, WORK_CLAIM):
        fig = figs.get(name)
        if fig is None:
            continue
        gen = fig.get("generator_cpu_us_per_op")
        server = per_op_us(fig, "server")
        shown_gen = f"{gen:,.0f} µs" + (f" ({gen / server:.2f}x the server's)" if server else "") if gen else "-"
        out.append(f"| `{name}` | {shown_value(fig)} | {cpu_line(fig)} | {per_unit_line(fig)} | {shown_gen} |")
    out.append("")
    wake = figs.get(WORK_WAKEUP)
    if wake:
        out += [
            "### Wake-up on a waiting Work stream",
            "",
            "From an Accept's answer to the push of its event on a Work stream that waits with credit 1 "
            "(grpc.aio, this process; the event is completed on the stream, the credit given back with it).",
            "",
            "| run | rounds | p50 | p90 | p99 | max |",
            "|---|---|---|---|---|---|",
        ]
        for r in wake["runs"]:
            out.append(
                f"| {r['run']} | {r['rounds']} | {r['p50_ms']:.2f} ms | {r['p90_ms']:.2f} ms | {r['p99_ms']:.2f} ms "
                f"| {r['max_ms']:.2f} ms |"
            )
        out.append("")
    rec = figs.get(WORK_RECOVERY)
    if rec:
        shown = ", ".join(
            (f"> {r['seconds']:.0f} s (not pushed)" if r.get("timed_out") else f"{1000 * r['seconds']:,.0f} ms")
            for r in rec["runs"]
        )
        out += [
            "### Recovery after a SIGKILLed worker",
            "",
            f"A Node worker holds {rec['held']} events on its Work stream (lease 30 s) and is SIGKILLed; another "
            f"worker's stream, subscribed and waiting with credit, is pushed them after: {shown}.",
            "",
        ]
    idle = figs.get(WORK_IDLE)
    if idle:
        out += [
            "### Idle Work streams",
            "",
            f"A fresh server holding {idle['streams']:,} Work streams (credit given, nothing to claim) on "
            f"{idle['connections']} connection{'s' if idle['connections'] != 1 else ''}, sampled once every "
            "subscription's first look reached pg_stat_database.",
            "",
            "| server CPU | PostgreSQL CPU | database transactions | server RSS | idle RSS | events pushed | "
            "streams that ended |",
            "|---|---|---|---|---|---|---|",
            f"| {idle['server_cpu_percent']:.1f}% of a core | {idle['postgres_cpu_percent']:.1f}% of a core | "
            f"{idle['db_transactions_per_s']:,.1f} /s | {idle['rss_mb']:.0f} MB | {idle['idle_rss_mb']:.0f} MB | "
            f"{idle['pushed']} | {idle['ended_early']} |",
            "",
        ]
    return out


def _method(cfg: dict[str, Any]) -> list[str]:
    wake_rounds = cfg.get("stream_wake_rounds", "?")
    return [
        "- AcceptStream: 64 callers on 4 connections, one stream each (16 items in flight per stream), unique "
        "keys, beside unary Accept at 64 callers on 4 connections (`inboxd.accept.c64`, the same run).",
        f"- Work claim -> complete: {cfg.get('claim_workers', '?')} workers, one Work stream each with credit "
        f"{CREDIT}, each push completed in one complete_batch on the stream that gives its credit back; over the "
        "same backlog, priming and VACUUM as the Claim figures, beside raw claim-10-then-complete.",
        f"- Wake-up: {cfg.get('wake_runs', '?')} runs of {wake_rounds} rounds after 10 unmeasured ones. Recovery: "
        f"{cfg.get('wake_runs', '?')} runs, each a fresh worker process killed with SIGKILL. Idle streams: sampled "
        f"for {cfg.get('long_poll_sample', '?')} s, as the long-polls are.",
    ]
