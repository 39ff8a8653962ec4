"""Claim -> Complete (batch 1 and 10) and Claim 10 -> CompleteBatch, each beside the raw claim-then-complete."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import psycopg

from bench import raw, support
from bench.cluster import checkpoint, execute
from bench.node_load import NodeLoad, run_node
from bench.run import Run
from bench.workload import CLEAR_EVENTS, EVENT_TYPE, PAYLOAD_BYTES, PREFILL_PENDING, PREFILL_PENDING_ORDERED, RUN_ID

CLAIM_NS = "bench/claim"
# The claim figure over ordering keys (issue 16): the backlog spread over this many keys.
ORDERING_KEYS = 1_000


async def prefill(
    url: str, n: int, prefix: str, *, namespace: str = CLAIM_NS, clear: bool = True, analyze: bool = True
) -> None:
    """`n` PENDING events straight into the table; then VACUUM (ANALYZE), unless a cold start is measured."""
    if clear:
        await execute(url, CLEAR_EVENTS)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        params = {
            "namespace": namespace,
            "prefix": f"{RUN_ID}-{prefix}-",
            "event_type": EVENT_TYPE,
            "payload": PAYLOAD_BYTES,
        }
        await conn.execute(PREFILL_PENDING, {**params, "n": n})
        if analyze:
            await conn.execute("VACUUM (ANALYZE) inbox_events")


async def prefill_ordered(url: str, n: int, prefix: str, keys: int = ORDERING_KEYS) -> None:
    """`n` PENDING events over `keys` ordering keys (revision 1, 2, ... per key, in acceptance order)."""
    await execute(url, CLEAR_EVENTS)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        params = {
            "namespace": CLAIM_NS,
            "prefix": f"{RUN_ID}-{prefix}-",
            "event_type": EVENT_TYPE,
            "payload": PAYLOAD_BYTES,
        }
        await conn.execute(PREFILL_PENDING_ORDERED, {**params, "n": n, "keys": keys})
        await conn.execute("VACUUM (ANALYZE) inbox_events")
        await conn.execute("VACUUM (ANALYZE) inbox_ordering_keys")


async def table_stats(url: str) -> dict[str, int]:
    """inbox_events' dead tuples and autovacuum runs so far (the statistics lag by up to a second)."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT n_dead_tup, autovacuum_count, autoanalyze_count FROM pg_stat_user_tables "
            "WHERE relname = 'inbox_events'"
        )
        row = await cur.fetchone()
    return {"dead_tuples": int(row[0]), "autovacuums": int(row[1]), "autoanalyzes": int(row[2])} if row else {}


async def with_table_stats(run: Run, name: str, url: str, measure: Any) -> None:
    """Runs the awaitable factory `measure` (which records `name`), noting what autovacuum did meanwhile."""
    await checkpoint(url)
    before = await table_stats(url)
    await measure()
    after = await table_stats(url)
    run.figures[name]["table"] = {
        "dead_tuples_after": after.get("dead_tuples", 0),
        "autovacuums": after.get("autovacuums", 0) - before.get("autovacuums", 0),
        "autoanalyzes": after.get("autoanalyzes", 0) - before.get("autoanalyzes", 0),
    }


async def prime_node(run: Run, url: str, load: NodeLoad) -> None:
    """An unmeasured burst of the workload, then VACUUM (ANALYZE), before a steady-state claim figure.

    Right after TRUNCATE the planner sees an empty inbox_claims, and the plans
    cached then scan it sequentially while it grows, until autovacuum analyzes
    it a minute later. Priming measures the steady state instead. How inboxd
    fares in those first seconds is its own figure (startup.py).
    """
    await run_node(replace(load, warmup_s=0.0, duration_s=run.config.prime), None)
    await execute(url, "VACUUM (ANALYZE) inbox_events", "VACUUM (ANALYZE) inbox_claims")


def claim_load(run: Run, batch: int, *, complete_batch: bool = False, carry: bool = False) -> NodeLoad:
    workload = "claim_carry" if carry else "claim_complete_batch" if complete_batch else "claim_complete"
    return run.node(workload, run.config.claim_workers, namespace=CLAIM_NS, max_events=batch)


Fill = Callable[[], Awaitable[None]]


async def inboxd_claim_figure(
    run: Run, name: str, load: NodeLoad, prefix: str, fill: Fill | None = None, **extra: Any
) -> None:
    async def attempt() -> None:
        await (fill() if fill else prefill(run.url, run.config.claim_prefill, prefix))
        await prime_node(run, run.url, load)
        await with_table_stats(run, name, run.url, lambda: run.measure_node(name, load, "rows/s", retry=False, **extra))

    await run.cleanest(name, attempt)


async def raw_claim_figure(run: Run, name: str, url: str, batch: int, *, prefix: str, fill: Fill | None = None) -> None:
    c = run.config

    async def attempt() -> None:
        await (fill() if fill else prefill(url, c.claim_prefill, prefix))
        async with raw.connections(url, c.claim_workers) as conns:
            steps = raw.claim_complete_steps(conns, CLAIM_NS, batch)
            await run.unmeasured(steps, c.prime)
            await execute(url, "VACUUM (ANALYZE) inbox_events", "VACUUM (ANALYZE) inbox_claims")
            await with_table_stats(run, name, url, lambda: run.measure_steps(name, steps, "rows/s", retry=False))

    await run.cleanest(name, attempt)


async def claim_phase(run: Run) -> None:
    for batch in (1, 10):
        await raw_claim_figure(run, f"raw.claim{batch}", run.raw_url, batch, prefix=f"raw-claim{batch}")
        await inboxd_claim_figure(run, f"inboxd.claim{batch}", claim_load(run, batch), f"claim{batch}")
    if support.lacks(run.support, support.COMPLETE_BATCH) is None:
        load = claim_load(run, 10, complete_batch=True)
        await inboxd_claim_figure(run, "inboxd.claim10.batch", load, "claim10-batch")
    if support.lacks(run.support, support.CLAIM_CARRIES) is None:
        # The worker's cycle in one call: each Claim carries the previous batch's completions.
        await inboxd_claim_figure(run, "inboxd.claim10.carry", claim_load(run, 10, carry=True), "claim10-carry")
    await ordered_claim_figure(run)
    await execute(run.raw_url, CLEAR_EVENTS)


async def ordered_claim_figure(run: Run) -> None:
    """Claim 10 -> Complete with the claim workers over a backlog spread over 1,000 ordering keys.

    Each key's events come out one at a time, so a Claim walks past the events
    of the keys in flight; beside inboxd.claim10 (the same load, no keys) it
    shows what ordering costs.
    """

    async def fill() -> None:
        await prefill_ordered(run.url, run.config.claim_prefill, "claim10-ordered")

    await inboxd_claim_figure(run, "inboxd.claim10.ordered", claim_load(run, 10), "claim10-ordered", fill)
