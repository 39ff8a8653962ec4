"""Waiting Claims: the plan of a Claim beside another namespace's backlog, wake-up latency, idle long-polls."""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import Any

from bench import grpc_load
from bench.cluster import execute
from bench.cpu import CpuProbe
from bench.longpolls import measure_long_polls
from bench.phases.claim import prefill
from bench.plans import explain_claim
from bench.run import Run
from bench.workload import CLEAR_EVENTS, Keys

log = logging.getLogger("bench")

BACKLOG_NS = "bench/backlog"
EMPTY_NS = "bench/empty"
WAKE_NS = "bench/wake"


async def backlog_phase(run: Run) -> None:
    """`backlog_rows` PENDING events in one namespace; a Claim on another, empty one, explained."""
    await prefill(run.url, run.config.backlog_rows, "backlog", namespace=BACKLOG_NS)
    run.extra["plans"] = {
        "backlog_rows": run.config.backlog_rows,
        **{mode: await explain_claim(run.url, EMPTY_NS, 1, mode) for mode in ("generic", "custom")},
    }
    for mode in ("generic", "custom"):
        found = run.extra["plans"][mode]
        log.info(
            "claim on an empty namespace beside %d pending, %s plan: %.2f ms, %d rows read",
            run.config.backlog_rows,
            mode,
            found["execution_ms"],
            found["rows_read"],
        )


async def wakeup_phase(run: Run) -> None:
    """Consecutive runs of wake-up rounds, beside the backlog left by backlog_phase."""
    runs: list[dict[str, Any]] = []
    p50s: list[float] = []
    p99s: list[float] = []
    async with grpc_load.stubs(run.target, channels=2) as (waiting, accepting):
        keys = Keys("wake")
        # A few rounds first: the first Claims pay for connections and plans.
        await grpc_load.wakeup_latencies(waiting, accepting, WAKE_NS, keys, 10)
        for index in range(run.config.wake_runs):
            first = run.probe.snapshot()
            latencies = await grpc_load.wakeup_latencies(waiting, accepting, WAKE_NS, keys, run.config.wake_rounds)
            cpu = CpuProbe.between(first, run.probe.snapshot())
            summary = {k: round(v, 3) for k, v in grpc_load.summarize_ms(latencies).items()}
            p50s.append(summary["p50_ms"])
            p99s.append(summary["p99_ms"])
            runs.append({"run": index + 1, "rounds": len(latencies), **summary, "cpu": cpu.to_json()})
            log.info("wake-up run %d: p50 %.2f ms, p99 %.2f ms", index + 1, summary["p50_ms"], summary["p99_ms"])
    run.figures["inboxd.wakeup"] = {
        "value": max(p99s),
        "unit": "ms",
        "runs": runs,
        "backlog_rows": run.config.backlog_rows,
        "rounds": run.config.wake_runs * run.config.wake_rounds,
        "p50_ms": max(p50s),
        "p99_ms": max(p99s),
    }


async def long_poll_phase(run: Run) -> None:
    """A fresh server holding `long_polls` Claims on an empty namespace, and nothing else in the table."""
    c = run.config
    await execute(run.url, CLEAR_EVENTS)
    env = {"INBOXD_MAX_WAITING_CLAIMS_PER_CALLER": str(2 * c.long_polls)}
    async with run.fresh_server(env) as server:
        result = await measure_long_polls(
            server,
            run.url,
            run.probe,
            waiting=c.long_polls,
            channels=c.long_poll_channels,
            wait_seconds=60,
            settle=8.0 if c.long_polls >= 2000 else 3.0,
            sample=c.long_poll_sample,
        )
    run.figures["inboxd.longpolls"] = {"value": round(result.rss_mb, 1), "unit": "MB", **asdict(result)}
    log.info(
        "%d waiting long-polls: RSS %.0f MB, server CPU %.1f%%, PostgreSQL CPU %.1f%%, %.1f transactions/s",
        result.waiting,
        result.rss_mb,
        result.server_cpu_percent,
        result.postgres_cpu_percent,
        result.db_transactions_per_s,
    )
