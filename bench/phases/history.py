"""Cost as history grows: Claim 10 -> Complete over millions of COMPLETED rows, inboxd and raw alike."""

from __future__ import annotations

import logging

from bench.cluster import execute
from bench.history import insert_history, time_stats_query
from bench.phases.claim import CLAIM_NS, claim_load, inboxd_claim_figure, prefill, raw_claim_figure
from bench.plans import explain_claim
from bench.run import Run
from bench.workload import CLEAR_EVENTS

log = logging.getLogger("bench")


async def history_phase(run: Run) -> None:
    c = run.config
    await execute(run.url, CLEAR_EVENTS)
    log.info("inserting %d COMPLETED rows in one statement, then VACUUM (ANALYZE) ...", c.history_rows)
    loaded = await insert_history(run.url, c.history_rows)
    log.info("history: insert %.0f s, vacuum+analyze %.0f s", loaded["insert_s"], loaded["vacuum_analyze_s"])
    stats_s = await time_stats_query(run.url)
    run.extra["history"] = {"rows": c.history_rows, **loaded, "stats_query_s": stats_s}
    attempts = iter(range(1_000_000))

    async def fresh_queue() -> None:
        """Pending events beside the history, and nothing left of an earlier attempt."""
        await execute(run.url, "DELETE FROM inbox_events WHERE state <> 'completed'")
        await prefill(run.url, c.claim_prefill, f"history-{next(attempts)}", clear=False)

    async def queue_and_plan() -> None:
        await fresh_queue()
        if "explain" not in run.extra["history"]:
            run.extra["history"]["explain"] = await explain_claim(run.url, CLAIM_NS, 10, "custom")

    await inboxd_claim_figure(
        run, "inboxd.claim10.history", claim_load(run, 10), "history", queue_and_plan, history_rows=c.history_rows
    )
    # The raw claim over the same rows: does the database itself slow down?
    await raw_claim_figure(run, "raw.claim10.history", run.url, 10, prefix="history", fill=fresh_queue)
