"""The order of a run: every raw figure measured right before the inboxd figure it is compared with."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import os
import platform
import subprocess
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import grpc
import psycopg

from bench import grpc_load, raw
from bench.cluster import BenchCluster, checkpoint, execute
from bench.cpu import OTHER, CpuProbe, machine_busy_seconds
from bench.figures import NOISY_PERCENT
from bench.history import explain_claim, insert_history, time_stats_query
from bench.longpolls import measure_long_polls
from bench.loop import Step, Throughput, closed_loop
from bench.peers import PRIMING_JOBS, WORKERS, Inboxd, PgQueuer, Procrastinate, System, one_round
from bench.server import BenchServer
from bench.workload import CLEAR_EVENTS, EVENT_TYPE, PAYLOAD, PREFILL_PENDING, RUN_ID, Keys

log = logging.getLogger("bench")

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"

ACCEPT_NS = "bench/accept"
CLAIM_NS = "bench/claim"
WAKE_NS = "bench/wake"


@dataclass
class Config:
    warmup: float = 2.0
    duration: float = 8.0
    concurrency: tuple[int, ...] = (1, 16, 64)
    batch_rows: int = 100
    batch_clients: int = 16
    claim_workers: int = WORKERS
    claim_prefill: int = 150_000
    prime: float = 1.5
    history_rows: int = 5_000_000
    wake_rounds: int = 200
    long_polls: int = 5000
    long_poll_channels: int = 10
    peer_jobs: int = 20_000
    peer_rounds: int = 3
    # Measured: uvloop lifts the raw 64-client INSERT baseline by about 40% and
    # leaves inboxd's figures alone (the server is the bound), so the baseline
    # is the stronger one with it.
    loop: str = "uvloop"
    # A window in which other processes took NOISY_PERCENT of a core is measured
    # again, this many times at most; the cleanest attempt is kept.
    noisy_retries: int = 1

    @classmethod
    def quick(cls) -> Config:
        """A smoke run: every phase, tiny windows; its results are not worth publishing."""
        return cls(
            warmup=0.3,
            duration=1.0,
            claim_prefill=20_000,
            history_rows=50_000,
            wake_rounds=20,
            long_polls=500,
            peer_jobs=2_000,
            peer_rounds=1,
        )


def figure(result: Throughput, unit: str, **extra: Any) -> dict[str, Any]:
    value = result.units_per_s if unit == "rows/s" else result.ops_per_s
    found: dict[str, Any] = {
        "value": round(value, 1),
        "unit": unit,
        "ops": result.ops,
        "units": result.units,
        "seconds": round(result.seconds, 3),
        "p50_ms": round(result.percentile_ms(0.50), 3),
        "p99_ms": round(result.percentile_ms(0.99), 3),
        "errors": result.errors,
        "first_error": result.first_error,
        "cpu": result.cpu.to_json() if result.cpu else None,
        **extra,
    }
    return found


class Run:
    """One `make bench`: the cluster, the server, the probe, and the figures so far."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.cluster = BenchCluster()
        self.probe = CpuProbe()
        self.figures: dict[str, dict[str, Any]] = {}
        self.results: dict[str, Throughput] = {}
        self.extra: dict[str, Any] = {}
        self.server: BenchServer | None = None
        self.url = ""
        self.raw_url = ""

    async def measure(
        self, name: str, steps: Sequence[Step], unit: str, *, retry: bool = True, **extra: Any
    ) -> Throughput:
        """One figure; measured again (up to noisy_retries times) while the window was noisy, if `retry`."""
        if not retry:
            return await self._measure_once(name, steps, unit, **extra)

        async def attempt() -> None:
            await self._measure_once(name, steps, unit, **extra)

        await self.cleanest(name, attempt)
        return self.results[name]

    async def cleanest(self, name: str, attempt: Callable[[], Awaitable[None]]) -> None:
        """Runs `attempt` (which records figure `name`) until a quiet window or out of retries; keeps the quietest."""
        kept: tuple[float, dict[str, Any], Throughput] | None = None
        for tries in range(1 + self.config.noisy_retries):
            if tries:
                await checkpoint(self.url)
            await attempt()
            fig, result = self.figures[name], self.results[name]
            noise = result.cpu.percent_of_core(OTHER) if result.cpu else 0.0
            if kept is None or noise < kept[0]:
                kept = (noise, fig, result)
            if noise < NOISY_PERCENT:
                break
            if tries < self.config.noisy_retries:
                log.info("%s: other processes took %.0f%% of a core; measuring again", name, noise)
        assert kept is not None
        self.figures[name], self.results[name] = kept[1], kept[2]
        self.figures[name]["attempts"] = tries + 1

    async def _measure_once(self, name: str, steps: Sequence[Step], unit: str, **extra: Any) -> Throughput:
        result = await closed_loop(steps, warmup=self.config.warmup, duration=self.config.duration, probe=self.probe)
        self.results[name] = result
        self.figures[name] = figure(result, unit, **extra)
        cpu = result.cpu
        shares = ", ".join(f"{part} {cpu.percent_of_core(part):.0f}%" for part in sorted(cpu.used)) if cpu else "no cpu"
        log.info(
            "%-28s %10.1f %-6s p50 %6.2f ms  p99 %7.2f ms  (%s)%s",
            name,
            self.figures[name]["value"],
            unit,
            result.percentile_ms(0.5),
            result.percentile_ms(0.99),
            shares,
            f"  {result.errors} errors, first: {result.first_error}" if result.errors else "",
        )
        return result

    async def start(self, *, server_env: dict[str, str] | None = None) -> None:
        self.extra["busy_before_start"] = await wait_for_quiet()
        log.info("starting PostgreSQL (durable) in %s", self.cluster.folder)
        await asyncio.to_thread(self.cluster.start)
        self.probe.watch("postgres", self.cluster.cpu_seconds)
        self.url = await self.cluster.create("inboxd", inboxd_schema=True)
        self.raw_url = await self.cluster.create("inboxd_raw", inboxd_schema=True)
        self.server = await self.start_server(server_env or {})
        self.probe.watch("server", self.server.cpu_seconds)

    async def start_server(self, env: dict[str, str]) -> BenchServer:
        log_path = self.cluster.folder / "inboxd.log"
        return await asyncio.to_thread(BenchServer(self.url, log_path, env).start)

    async def stop(self) -> None:
        if self.server is not None:
            await asyncio.to_thread(self.server.stop)
        await asyncio.to_thread(self.cluster.stop)

    async def facts(self) -> dict[str, Any]:
        return {
            "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "git": _git_revision(),
            "machine": _machine(),
            "postgres": await self.cluster.facts(),
            "versions": {
                name: metadata.version(name) for name in ("inboxd", "grpcio", "protobuf", "psycopg", "psycopg-pool")
            },
            "python": platform.python_version(),
            "loop": self.config.loop,
            "config": asdict(self.config),
        }


async def wait_for_quiet(limit: float = 120.0, quiet_percent: float = 25.0) -> float:
    """Waits (up to `limit` s) until other processes use under `quiet_percent` of a core; returns the last reading."""
    deadline = time.monotonic() + limit
    while True:
        before, t0 = machine_busy_seconds(), time.monotonic()
        await asyncio.sleep(2.0)
        busy = 100 * (machine_busy_seconds() - before) / (time.monotonic() - t0)
        if busy < quiet_percent or time.monotonic() > deadline:
            if busy >= quiet_percent:
                log.warning("the machine is busy: %.0f%% of a core in use by others; figures will be noisy", busy)
            return round(busy, 1)
        log.info("the machine is busy (%.0f%% of a core in use by others); waiting for it to quieten", busy)


# -- phases --


async def accept_phase(run: Run) -> None:
    assert run.server is not None
    c = run.config
    remembered: dict[str, list[str]] = {}
    async with grpc_load.stubs(run.server.target) as (stub,):
        for clients in c.concurrency:
            keys = Keys(f"raw-insert-{clients}", remember=clients == max(c.concurrency))
            async with raw.connections(run.raw_url, clients) as conns:
                await _quiet(run)
                await run.measure(f"raw.insert.c{clients}", raw.insert_one_steps(conns, ACCEPT_NS, keys), "tx/s")
            if keys.remember:
                remembered["raw"] = keys.issued
            keys = Keys(f"accept-{clients}", remember=clients == max(c.concurrency))
            await _quiet(run)
            await run.measure(
                f"inboxd.accept.c{clients}", grpc_load.accept_steps(stub, clients, ACCEPT_NS, keys), "tx/s"
            )
            if keys.remember:
                remembered["inboxd"] = keys.issued

        # The floor under every inboxd figure: an RPC that does no inboxd work.
        top = max(c.concurrency)
        async with grpc.aio.insecure_channel(run.server.target) as chan:
            await _quiet(run)
            await run.measure(f"inboxd.empty_rpc.c{top}", grpc_load.empty_rpc_steps(chan, top), "tx/s")

        keys = Keys("raw-insert-batch")
        async with raw.connections(run.raw_url, c.batch_clients) as conns:
            await _quiet(run)
            await run.measure("raw.insert_batch", raw.insert_many_steps(conns, ACCEPT_NS, keys, c.batch_rows), "rows/s")
        keys = Keys("accept-batch")
        await _quiet(run)
        await run.measure(
            "inboxd.accept_batch",
            grpc_load.accept_batch_steps(stub, c.batch_clients, ACCEPT_NS, keys, c.batch_rows),
            "rows/s",
        )

        async with raw.connections(run.raw_url, top) as conns:
            await _quiet(run)
            await run.measure(f"raw.duplicate.c{top}", raw.duplicate_steps(conns, ACCEPT_NS, remembered["raw"]), "tx/s")
        await _quiet(run)
        await run.measure(
            f"inboxd.duplicate.c{top}", grpc_load.duplicate_steps(stub, top, ACCEPT_NS, remembered["inboxd"]), "tx/s"
        )


async def prefill(url: str, n: int, prefix: str, *, clear: bool = True) -> None:
    if clear:
        await execute(url, CLEAR_EVENTS)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(
            PREFILL_PENDING,
            {
                "namespace": CLAIM_NS,
                "prefix": f"{RUN_ID}-{prefix}-",
                "event_type": EVENT_TYPE,
                "payload": PAYLOAD,
                "n": n,
            },
        )
        await conn.execute("VACUUM (ANALYZE) inbox_events")


async def table_stats(url: str) -> dict[str, int]:
    """inbox_events' dead tuples and autovacuum runs so far (the statistics lag by up to a second)."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT n_dead_tup, autovacuum_count, autoanalyze_count FROM pg_stat_user_tables "
            "WHERE relname = 'inbox_events'"
        )
        row = await cur.fetchone()
    return {"dead_tuples": int(row[0]), "autovacuums": int(row[1]), "autoanalyzes": int(row[2])} if row else {}


async def measure_claims(run: Run, name: str, url: str, steps: Sequence[Step], **extra: Any) -> None:
    """A claim figure, with what autovacuum did to inbox_events meanwhile."""
    before = await table_stats(url)
    await run.measure(name, steps, "rows/s", retry=False, **extra)
    after = await table_stats(url)
    run.figures[name]["table"] = {
        "dead_tuples_after": after.get("dead_tuples", 0),
        "autovacuums": after.get("autovacuums", 0) - before.get("autovacuums", 0),
        "autoanalyzes": after.get("autoanalyzes", 0) - before.get("autoanalyzes", 0),
    }


async def prime(run: Run, url: str, steps: Sequence[Step]) -> None:
    """An unmeasured burst of the workload, then VACUUM (ANALYZE), before a claim figure.

    Right after TRUNCATE the planner sees an empty inbox_claims, and the plans
    cached then (the claim query's, and inboxd_complete_event's) scan it
    sequentially while it grows, until autovacuum analyzes it a minute later.
    Priming measures the steady state instead: plans made on statistics that
    know the table holds rows, and a queue that starts unbloated.
    """
    await closed_loop(steps, warmup=0.0, duration=run.config.prime)
    await execute(url, "VACUUM (ANALYZE) inbox_events", "VACUUM (ANALYZE) inbox_claims")


async def claim_phase(run: Run) -> None:
    assert run.server is not None
    c = run.config
    async with grpc_load.stubs(run.server.target) as (stub,):
        for batch in (1, 10):

            async def raw_claims(batch: int = batch) -> None:
                await prefill(run.raw_url, c.claim_prefill, f"raw-claim{batch}")
                async with raw.connections(run.raw_url, c.claim_workers) as conns:
                    steps = raw.claim_complete_steps(conns, CLAIM_NS, batch)
                    await prime(run, run.raw_url, steps)
                    await _quiet(run)
                    await measure_claims(run, f"raw.claim{batch}", run.raw_url, steps)

            async def inboxd_claims(batch: int = batch) -> None:
                await prefill(run.url, c.claim_prefill, f"claim{batch}")
                steps = grpc_load.claim_complete_steps(stub, c.claim_workers, CLAIM_NS, batch)
                await prime(run, run.url, steps)
                await _quiet(run)
                await measure_claims(run, f"inboxd.claim{batch}", run.url, steps)

            await run.cleanest(f"raw.claim{batch}", raw_claims)
            await run.cleanest(f"inboxd.claim{batch}", inboxd_claims)
    await execute(run.raw_url, CLEAR_EVENTS)


async def wakeup_phase(run: Run) -> None:
    assert run.server is not None
    await execute(run.url, CLEAR_EVENTS)
    async with grpc_load.stubs(run.server.target, channels=2) as (waiting, accepting):
        # A few rounds first: the first Claims pay for connections and plans.
        keys = Keys("wake")
        await grpc_load.wakeup_latencies(waiting, accepting, WAKE_NS, keys, 10)
        first = run.probe.snapshot()
        latencies = await grpc_load.wakeup_latencies(waiting, accepting, WAKE_NS, keys, run.config.wake_rounds)
        cpu = CpuProbe.between(first, run.probe.snapshot())
    summary = grpc_load.summarize_ms(latencies)
    run.figures["inboxd.wakeup"] = {
        "value": round(summary["p50_ms"], 3),
        "unit": "ms",
        "rounds": len(latencies),
        "cpu": cpu.to_json(),
    }
    run.figures["inboxd.wakeup"].update({k: round(v, 3) for k, v in summary.items()})
    log.info(
        "wake-up latency               p50 %.2f ms  p99 %.2f ms  (other %.0f%%)",
        summary["p50_ms"],
        summary["p99_ms"],
        cpu.percent_of_core("other"),
    )


async def long_poll_phase(run: Run) -> None:
    c = run.config
    # A fresh server: its memory is then the waiters', not the leftovers of earlier phases.
    server = await run.start_server({"INBOXD_MAX_WAITING_CLAIMS_PER_CALLER": str(2 * c.long_polls)})
    run.probe.watch("server", server.cpu_seconds)
    try:
        result = await measure_long_polls(
            server,
            run.url,
            run.probe,
            waiting=c.long_polls,
            channels=c.long_poll_channels,
            wait_seconds=30,
            settle=8.0 if c.long_polls >= 2000 else 3.0,
            sample=5.0,
        )
    finally:
        await asyncio.to_thread(server.stop)
        assert run.server is not None
        run.probe.watch("server", run.server.cpu_seconds)
    run.figures["inboxd.longpolls"] = {"value": round(result.rss_mb, 1), "unit": "MB", **asdict(result)}
    log.info(
        "%d waiting long-polls: RSS %.0f MB (idle %.0f MB), server CPU %.0f%%, PostgreSQL CPU %.0f%%, "
        "%.0f transactions/s, ended early: %s",
        result.waiting,
        result.rss_mb,
        result.idle_rss_mb,
        result.server_cpu_percent,
        result.postgres_cpu_percent,
        result.db_transactions_per_s,
        result.ended_early or "none",
    )


async def history_phase(run: Run) -> None:
    assert run.server is not None
    c = run.config
    await execute(run.url, CLEAR_EVENTS)
    log.info("inserting %d COMPLETED rows in one statement, then VACUUM (ANALYZE) ...", c.history_rows)
    loaded = await insert_history(run.url, c.history_rows)
    log.info(
        "history: insert %.0f s, vacuum+analyze %.0f s, inbox_events %.0f MB (heap %.0f MB)",
        loaded["insert_s"],
        loaded["vacuum_analyze_s"],
        loaded["table_total_mb"],
        loaded["heap_mb"],
    )
    stats_s = await time_stats_query(run.url)
    log.info("the server's Stats refresh query now takes %.2f s (it runs every 15 s)", stats_s)
    run.extra["history"] = {"rows": c.history_rows, **loaded, "stats_query_s": stats_s}

    attempts = iter(range(1_000_000))

    async def fresh_queue() -> None:
        """Pending events beside the history, and nothing left of an earlier attempt."""
        await execute(run.url, "DELETE FROM inbox_events WHERE state <> 'completed'")
        await prefill(run.url, c.claim_prefill, f"history-{next(attempts)}", clear=False)

    async with grpc_load.stubs(run.server.target) as (stub,):
        steps = grpc_load.claim_complete_steps(stub, c.claim_workers, CLAIM_NS, 10)

        async def inboxd_claims() -> None:
            await fresh_queue()
            await prime(run, run.url, steps)
            if "explain" not in run.extra:
                run.extra["explain"] = await explain_claim(run.url, CLAIM_NS, 10)
            await _quiet(run)
            await measure_claims(run, "inboxd.claim10.history", run.url, steps, history_rows=c.history_rows)

        await run.cleanest("inboxd.claim10.history", inboxd_claims)

    # The raw claim over the same 5 million rows: does the database itself slow down?
    async with raw.connections(run.url, c.claim_workers) as conns:
        raw_steps = raw.claim_complete_steps(conns, CLAIM_NS, 10)

        async def raw_claims() -> None:
            await fresh_queue()
            await prime(run, run.url, raw_steps)
            await _quiet(run)
            await measure_claims(run, "raw.claim10.history", run.url, raw_steps, history_rows=c.history_rows)

        await run.cleanest("raw.claim10.history", raw_claims)


async def _quiet(run: Run) -> None:
    """A checkpoint before each window, so none pays for the previous one's dirty pages."""
    await checkpoint(run.url)


# -- entry points --


async def run_bench(config: Config) -> dict[str, Any]:
    run = Run(config)
    await run.start()
    try:
        facts = await run.facts()
        phases: list[tuple[str, Callable[[Run], Awaitable[None]]]] = [
            ("accept", accept_phase),
            ("claim", claim_phase),
            ("wake-up", wakeup_phase),
            ("long-polls", long_poll_phase),
            ("history", history_phase),
        ]
        for name, phase in phases:
            log.info("-- %s --", name)
            await phase(run)
    finally:
        await run.stop()
    return {"kind": "bench", **facts, "figures": run.figures, **run.extra}


async def run_peers(config: Config) -> dict[str, Any]:
    run = Run(config)
    await run.start()
    systems: list[System] = []
    try:
        facts = await run.facts()
        pgq_url = await run.cluster.create("pgqueuer", inboxd_schema=False)
        proc_url = await run.cluster.create("procrastinate", inboxd_schema=False)
        facts["versions"].update({name: metadata.version(name) for name in ("pgqueuer", "procrastinate")})
        assert run.server is not None
        rounds: list[dict[str, Any]] = []
        async with grpc_load.stubs(run.server.target) as (stub,):
            systems = [Inboxd(stub, run.url), PgQueuer(pgq_url), Procrastinate(proc_url)]
            for system in systems:
                await system.setup()
                log.info("-- %s: priming with %d jobs --", system.name, PRIMING_JOBS)
                await one_round(system, PRIMING_JOBS, run.probe)
            for round_no in range(config.peer_rounds):
                for system in systems:
                    log.info("-- %s, round %d: %d jobs --", system.name, round_no + 1, config.peer_jobs)
                    result = await one_round(system, config.peer_jobs, run.probe)
                    log.info(
                        "%-14s enqueue %.1f s, drain %.1f s: %.0f jobs/s",
                        system.name,
                        result.enqueue_s,
                        result.drain_s,
                        result.jobs_per_s,
                    )
                    rounds.append({"round": round_no + 1, **result.to_json()})
            for system in systems:
                await system.close()
    finally:
        await run.stop()
    return {"kind": "peers", **facts, "rounds": rounds}


def save(results: dict[str, Any], name: str) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(results, indent=2, sort_keys=False) + "\n")
    return path


def _git_revision() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", "server"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head} (server/ has uncommitted changes)" if dirty else head


def _machine() -> dict[str, Any]:
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_kb = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": model,
        "memory_gib": round(mem_kb / 1024 / 1024, 1),
        "kernel": platform.release(),
    }
