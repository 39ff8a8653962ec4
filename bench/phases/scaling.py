"""`inboxd serve --workers 2` beside `--workers 1`: Accept at the top concurrency, same generator."""

from __future__ import annotations

import asyncio

from bench import support
from bench.phases.accept import ACCEPT_NS
from bench.run import Run


async def workers_phase(run: Run) -> None:
    if support.lacks(run.support, support.WORKERS) is not None:
        return
    top = max(run.config.concurrency)
    server = await run.start_server(workers=2)
    previous = await run.swap_server(server)
    try:
        # The generator as for `--workers 1`: its four connections are what SO_REUSEPORT spreads.
        load = run.node("accept", top, namespace=ACCEPT_NS, prefix="accept-workers2")
        await run.measure_node(f"inboxd.accept.c{top}.workers2", load, "tx/s", server_workers=2)
    finally:
        await run.swap_server(previous)
        await asyncio.to_thread(server.stop)
