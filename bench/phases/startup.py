"""The first seconds after start: Claim 10 -> Complete against a database migrated a moment ago.

A fresh database, migrated by the server itself as on a first start, then
the queue filled and measured at once, for `cold_window` seconds with no
warm-up, no priming and no ANALYZE: whatever statistics the tables have then
are the ones inboxd (or its migrations) gave them. The steady-state figure it
is divided by is inboxd.claim10 of the same run.
"""

from __future__ import annotations

import asyncio

from bench import support
from bench.phases.claim import CLAIM_NS, prefill
from bench.run import Run

COLD_DATABASE = "inboxd_cold"


async def startup_phase(run: Run) -> None:
    c = run.config
    url = await run.cluster.create(COLD_DATABASE, inboxd_schema=False)
    workers = 1 if support.lacks(run.support, support.WORKERS) is None else None
    server = await run.start_server(url=url, workers=workers)
    previous = await run.swap_server(server)
    try:
        await prefill(url, c.claim_prefill, "cold", analyze=False)
        load = run.node(
            "claim_complete", c.claim_workers, namespace=CLAIM_NS, max_events=10, warmup_s=0.0, duration_s=c.cold_window
        )
        await run.measure_node("inboxd.claim10.cold", load, "rows/s", retry=False, window_s=c.cold_window)
    finally:
        await run.swap_server(previous)
        await asyncio.to_thread(server.stop)
