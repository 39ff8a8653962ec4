"""Server memory with thousands of waiting long-polls, and what idle waiters cost the database."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from dataclasses import dataclass

import grpc
import psycopg
from google.protobuf.duration_pb2 import Duration

from bench.cpu import CpuProbe
from bench.grpc_load import stubs
from bench.server import BenchServer
from inboxd_client.v1 import inbox_pb2

MB = 1024 * 1024
# PostgreSQL reports a backend's transactions to pg_stat_database when it goes idle, but at most
# once a second; a count held back that way is reported 10 s later (PGSTAT_IDLE_INTERVAL). So the
# window opens that long after the start-up's Claims, or it counts their looks as the waiters' cost:
# 5,000 Claims done 8 s earlier showed as 17 to 120 "idle" transactions a second, while
# pg_stat_statements counted 1.5 statements a second in the same window.
STATS_LAG_SECONDS = 11.0


@dataclass
class LongPollResult:
    waiting: int
    wait_seconds: int
    idle_rss_mb: float
    rss_mb: float
    peak_rss_mb: float
    server_cpu_percent: float
    postgres_cpu_percent: float
    db_transactions_per_s: float
    # Calls that ended before their wait did, by status code: a waiter should not end early.
    ended_early: dict[str, int]


async def _commits(url: str) -> int:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()"
        )
        row = await cur.fetchone()
        return int(row[0]) if row else 0


async def measure_long_polls(
    server: BenchServer,
    database_url: str,
    probe: CpuProbe,
    *,
    waiting: int,
    channels: int,
    wait_seconds: int,
    settle: float,
    sample: float,
) -> LongPollResult:
    """Holds `waiting` Claims (wait=`wait_seconds`) on one empty namespace; samples RSS while they wait.

    `settle`: time for the Claims to reach the server and make their first look.
    """
    idle_rss = server.rss()
    request = inbox_pb2.ClaimRequest(
        namespaces=["bench/idle"], max_events=1, wait=Duration(seconds=wait_seconds), worker_id="bench-idle"
    )
    async with stubs(server.target, channels) as opened:
        started = time.monotonic()
        calls = [asyncio.ensure_future(opened[i % channels].Claim(request)) for i in range(waiting)]
        await asyncio.sleep(settle + STATS_LAG_SECONDS)
        sampled = await sample_idle(server, database_url, probe, sample)
        if time.monotonic() - started >= wait_seconds:
            raise RuntimeError("sampling outlasted the waits; raise wait_seconds")
        ended: Counter[str] = Counter()
        for call in calls:
            if call.done():
                error = call.exception()
                code = error.code().name if isinstance(error, grpc.aio.AioRpcError) else type(error).__name__
                ended["OK" if error is None else code] += 1
            else:
                call.cancel()
        for call in calls:
            with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                await call
    return LongPollResult(
        waiting=waiting,
        wait_seconds=wait_seconds,
        idle_rss_mb=idle_rss / MB,
        rss_mb=sampled.rss_mb,
        peak_rss_mb=server.peak_rss() / MB,
        server_cpu_percent=sampled.server_cpu_percent,
        postgres_cpu_percent=sampled.postgres_cpu_percent,
        db_transactions_per_s=sampled.db_transactions_per_s,
        ended_early=dict(ended),
    )


@dataclass
class IdleSample:
    """What a server holding idle waiters (long-polls, Work streams) cost over a window."""

    rss_mb: float
    server_cpu_percent: float
    postgres_cpu_percent: float
    db_transactions_per_s: float


async def sample_idle(server: BenchServer, database_url: str, probe: CpuProbe, sample: float) -> IdleSample:
    """`sample` seconds of the server's RSS (the highest of 4 a second), CPU, and database transactions.

    Start it STATS_LAG_SECONDS after the waiters' first looks, or it counts those.
    """
    commits_before = await _commits(database_url)
    first = probe.snapshot()
    rss_samples: list[int] = []
    deadline = time.monotonic() + sample
    while time.monotonic() < deadline:
        rss_samples.append(server.rss())
        await asyncio.sleep(0.25)
    cpu = CpuProbe.between(first, probe.snapshot())
    commits_after = await _commits(database_url)
    return IdleSample(
        rss_mb=max(rss_samples) / MB,
        server_cpu_percent=cpu.percent_of_core("server"),
        postgres_cpu_percent=cpu.percent_of_core("postgres"),
        # The sampling connection's own two transactions are noise at this scale.
        db_transactions_per_s=(commits_after - commits_before) / cpu.seconds if cpu.seconds else 0.0,
    )
