"""Thousands of idle Work streams (credit given, nothing to claim): what they cost the server and the database.

The Node generator holds them (work_idle in streams.mjs) on a few connections,
STREAMS_PER_CONNECTION each, below the server's HTTP/2 limit on concurrent
streams per connection (INBOXD_MAX_STREAMS_PER_CONNECTION, 2,048 by default).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from dataclasses import asdict

from bench.cluster import execute
from bench.longpolls import MB, STATS_LAG_SECONDS, sample_idle
from bench.node_load import NodeLoad, next_line, spawn_node
from bench.phases.work import not_served
from bench.run import Run
from bench.workload import CLEAR_EVENTS

log = logging.getLogger("bench")

WORK_IDLE = "inboxd.work.idle"
IDLE_NS = "bench/idle-streams"
STREAMS_PER_CONNECTION = 500
# Time for every stream's subscription and first look to be over before the window.
SETTLE_SECONDS = 2.0


async def idle_streams_phase(run: Run) -> None:
    """A fresh server holding `idle_streams` Work streams on an empty namespace, and nothing else in the table."""
    if not_served(run, "idle-streams"):
        return
    c = run.config
    await execute(run.url, CLEAR_EVENTS)
    channels = math.ceil(c.idle_streams / STREAMS_PER_CONNECTION)
    # One caller holds them all (no tokens: every loopback caller is one): above its stream cap by default.
    async with run.fresh_server({"INBOXD_MAX_STREAMS_PER_CALLER": str(2 * c.idle_streams)}) as server:
        idle_rss = server.rss()
        load = NodeLoad(server.target, "work_idle", c.idle_streams, 0.0, 0.0, namespace=IDLE_NS, channels=channels)
        proc = await spawn_node(load, stdin=True)
        assert proc.stdin is not None
        try:
            subscribed = await next_line(proc, "subscribed", 120.0)
            if subscribed["streams"] != c.idle_streams:
                raise RuntimeError(f"{subscribed['streams']} of {c.idle_streams} Work streams were subscribed")
            await asyncio.sleep(SETTLE_SECONDS + STATS_LAG_SECONDS)
            sampled = await sample_idle(server, run.url, run.probe, c.long_poll_sample)
            proc.stdin.close()
            ended = await next_line(proc, "result", 30.0)
        finally:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
    run.figures[WORK_IDLE] = {
        "value": round(sampled.rss_mb, 1),
        "unit": "MB",
        "streams": c.idle_streams,
        "connections": channels,
        "idle_rss_mb": round(idle_rss / MB, 1),
        **{k: round(v, 2) for k, v in asdict(sampled).items()},
        "pushed": ended["pushed"],
        "ended_early": ended["ended"],
        "first_error": ended["first_error"],
    }
    log.info(
        "%d idle Work streams: RSS %.0f MB, server CPU %.1f%%, PostgreSQL CPU %.1f%%, %.1f transactions/s",
        c.idle_streams,
        sampled.rss_mb,
        sampled.server_cpu_percent,
        sampled.postgres_cpu_percent,
        sampled.db_transactions_per_s,
    )
