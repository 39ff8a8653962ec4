"""Stats as the table grows, and what the maintained counts cost Accept, Claim and Complete.

Run by hand (minutes, never in CI): `.venv/bin/python -m bench.stats_sizes 1000000 5000000`.
A throwaway PostgreSQL of its own (tests/harness.py, fsync off: the figures
are the statements' work, not the disk's). Each size holds 10% open events
(80% PENDING, 20% PROCESSING) spread over 10 namespaces and 90% COMPLETED, built by
INSERT ... SELECT generate_series; a size adds rows to the one before. Stats
is timed as the admin use case runs it (inspection.namespace_stats, custom
plans), warm, median of five. The write figures are one connection's
sequential calls through the store's own functions, empty and at the smallest
size, with migration 0028's counting triggers off and on in turn; and
PostgreSQL's own time inside those triggers per statement (EXPLAIN ANALYZE).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from datetime import timedelta

import psycopg

from inboxd.domain.vocabulary import ClaimRequest, Completion, Disposition, EventKey, Fence, Namespace, NewEvent
from inboxd.store import accepts, claims, inspection
from inboxd.store.database import Database
from inboxd.store.migrate import migrate
from tests.harness import discard_postgres, throwaway_postgres

NAMESPACES = 10

_FILL = """
INSERT INTO inbox_events (namespace, event_key, event_type, raw_payload, state, accepted_at, available_at, due_at,
                          updated_at, attempt, claim_token, fencing_token, lease_expires_at, completed_at, disposition)
SELECT 'tenant-' || ((i / 10) %% {ns}), 'k' || i, 'test.event',
       CASE WHEN i %% 10 = 0 THEN '\\x7b7d'::bytea END,
       CASE WHEN i %% 10 <> 0 THEN 'completed' WHEN i %% 50 = 0 THEN 'processing' ELSE 'pending' END,
       now() - interval '1 hour', now() - interval '1 hour',
       CASE WHEN i %% 10 <> 0 THEN NULL WHEN i %% 50 = 0 THEN now() + interval '1 hour'
            ELSE now() - interval '1 hour' END,
       now(), CASE WHEN i %% 50 = 0 THEN 1 ELSE 0 END,
       CASE WHEN i %% 10 = 0 AND i %% 50 = 0 THEN 't' || i END,
       CASE WHEN i %% 10 = 0 AND i %% 50 = 0 THEN i END,
       CASE WHEN i %% 10 = 0 AND i %% 50 = 0 THEN now() + interval '1 hour' END,
       CASE WHEN i %% 10 <> 0 THEN now() END,
       CASE WHEN i %% 10 <> 0 THEN 'applied' END
FROM generate_series(%(first)s, %(last)s) AS i
"""


async def time_stats(db: Database) -> float:
    async def once() -> float:
        started = time.perf_counter()
        await db.run(
            lambda conn: inspection.namespace_stats(conn, namespace=None, action_stale_after=timedelta(minutes=5)),
            custom_plans=True,
        )
        return time.perf_counter() - started

    await once()
    return statistics.median([await once() for _ in range(5)])


async def time_writes(db: Database, label: str) -> None:
    """Per call: Accept of one event, AcceptBatch of 100, Claim 10 then Complete those 10."""
    rounds = 1000
    started = time.perf_counter()
    for i in range(rounds):
        event = NewEvent(Namespace("bench/w"), EventKey(f"{label}-s{i}"), "test.event", b"{}")
        await accepts.accept_events(db, [event])
    single = (time.perf_counter() - started) / rounds
    batches = 50
    started = time.perf_counter()
    for b in range(batches):
        batch = [NewEvent(Namespace("bench/w"), EventKey(f"{label}-b{b}-{i}"), "test.event", b"{}") for i in range(100)]
        await accepts.accept_events(db, batch)
    batch_100 = (time.perf_counter() - started) / batches
    request = ClaimRequest(("bench/w",), (), 10, timedelta(seconds=30), timedelta(0), "bench")
    started, cycles = time.perf_counter(), 0
    while True:
        batch_claimed = await db.run(
            lambda conn: claims.claim_events(conn, request, max_attempts=10, max_bytes=3 << 20)
        )
        if not batch_claimed.events:
            break
        done = [
            Completion(Fence(e.namespace, e.event_key, e.claim_token), Disposition.APPLIED, "")
            for e in batch_claimed.events
        ]
        await db.run(lambda conn, done=done: claims.complete_events(conn, done))
        cycles += 1
    claim_complete = (time.perf_counter() - started) / max(cycles, 1)
    print(
        f"writes[{label}]: Accept 1: {single * 1e6:.0f} us; AcceptBatch 100: {batch_100 * 1e3:.2f} ms;"
        f" Claim 10 + Complete 10: {claim_complete * 1e3:.2f} ms ({cycles} cycles)",
        flush=True,
    )


_TRIGGERS = (
    "inbox_events_state_counts_inserted",
    "inbox_events_state_counts_updated",
    "inbox_events_state_counts_deleted",
)


async def counting(conninfo: str, on: bool) -> bool:
    """Turns migration 0028's triggers on or off; False when there are none (the code before it)."""
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        cur = await conn.execute("SELECT count(*) FROM pg_trigger WHERE tgname = ANY(%s)", (list(_TRIGGERS),))
        row = await cur.fetchone()
        if not row or not row[0]:
            return False
        for trigger in _TRIGGERS:
            await conn.execute(f"ALTER TABLE inbox_events {'ENABLE' if on else 'DISABLE'} TRIGGER {trigger}")
    return True


async def compare_writes(db: Database, conninfo: str, label: str) -> None:
    """The write figures with the counting triggers off and on, alternated on the same database."""
    for round_ in range(3):
        for on in (False, True):
            if await counting(conninfo, on) or not on:
                await time_writes(db, f"{label}-{round_}-{'counted' if on else 'uncounted'}")
    await counting(conninfo, True)


_TRIGGER_CASES = {
    "Accept 1 (INSERT 1 row)": "INSERT INTO inbox_events (namespace, event_key, event_type, raw_payload, accepted_at,"
    " available_at, due_at, updated_at) SELECT 'bench/t', 't{n}-' || i, 'test.event', '\\x7b7d', now(), now(), now(),"
    " now() FROM generate_series(1, 1) AS i",
    "AcceptBatch 100 (INSERT 100 rows)": "INSERT INTO inbox_events (namespace, event_key, event_type, raw_payload,"
    " accepted_at, available_at, due_at, updated_at) SELECT 'bench/t', 'b{n}-' || i, 'test.event', '\\x7b7d', now(),"
    " now(), now(), now() FROM generate_series(1, 100) AS i",
    "Claim 10 (UPDATE 10 rows to processing)": "UPDATE inbox_events SET state = 'processing', claim_token = 'c',"
    " fencing_token = 1, lease_expires_at = now() + interval '1 hour', due_at = now() + interval '1 hour'"
    " WHERE ctid IN (SELECT ctid FROM inbox_events WHERE namespace = 'bench/t' AND state = 'pending' LIMIT 10)",
    "Complete 10 (UPDATE 10 rows to completed)": "UPDATE inbox_events SET state = 'completed', completed_at = now(),"
    " disposition = 'applied', due_at = NULL, claim_token = NULL, lease_expires_at = NULL"
    " WHERE ctid IN (SELECT ctid FROM inbox_events WHERE namespace = 'bench/t' AND state = 'processing' LIMIT 10)",
    "RenewLease 10 (UPDATE 10 rows, no state change)": "UPDATE inbox_events SET updated_at = now()"
    " WHERE ctid IN (SELECT ctid FROM inbox_events WHERE namespace = 'bench/t' LIMIT 10)",
}


async def trigger_costs(conninfo: str) -> None:
    """PostgreSQL's own time in the counting triggers per statement (EXPLAIN ANALYZE), median of 50."""
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        for label, statement in _TRIGGER_CASES.items():
            spent: list[float] = []
            for n in range(50):
                cur = await conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + statement.format(n=n))
                row = await cur.fetchone()
                assert row is not None
                [plan] = row[0]
                spent.append(sum(t["Time"] for t in plan.get("Triggers", []) if "state_counts" in t["Trigger Name"]))
            print(f"triggers[{label}]: {statistics.median(spent) * 1e3:.0f} us", flush=True)


async def main(sizes: list[int]) -> None:
    pg = throwaway_postgres()
    try:
        await migrate(pg.conninfo)
        db = Database(pg.conninfo, min_size=1, max_size=1)
        await db.open()
        try:
            await compare_writes(db, pg.conninfo, "empty")
            await trigger_costs(pg.conninfo)
            print(f"stats[0]: {await time_stats(db) * 1e3:.1f} ms", flush=True)
            built = 0
            for size in sizes:
                started = time.perf_counter()
                async with await psycopg.AsyncConnection.connect(pg.conninfo, autocommit=True) as conn:
                    await conn.execute(_FILL.format(ns=NAMESPACES), {"first": built + 1, "last": size})
                    await conn.execute("VACUUM ANALYZE inbox_events")
                built = size
                print(f"built {size} rows in {time.perf_counter() - started:.0f} s", flush=True)
                print(f"stats[{size}]: {await time_stats(db) * 1e3:.1f} ms", flush=True)
                if size == sizes[0]:
                    await compare_writes(db, pg.conninfo, f"at{size}")
        finally:
            await db.close()
    finally:
        discard_postgres(pg)


if __name__ == "__main__":
    asyncio.run(main([int(a) for a in sys.argv[1:]] or [1_000_000]))
