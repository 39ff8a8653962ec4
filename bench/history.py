"""Cost as history grows: millions of COMPLETED rows, and the claim query's plan over them."""

from __future__ import annotations

import time
from typing import LiteralString

import psycopg

from bench.workload import EVENT_TYPE, PAYLOAD_BYTES
from inboxd.store.queries import QUERIES

# One statement, as the issue asks: COMPLETED rows as inboxd leaves them
# (claim ended, disposition applied, due_at NULL), completed within the last
# hour so retention (7 days by default) leaves them alone during the run;
# the payload is bytes into raw_payload, as inboxd writes since migration 0019.
INSERT_HISTORY: LiteralString = """
INSERT INTO inbox_events (namespace, event_key, event_type, raw_payload, state, accepted_at, available_at,
                          due_at, updated_at, attempt, claim_token, fencing_token, worker_id,
                          completed_at, disposition)
SELECT 'bench/history-' || (g %% 16), 'done-' || g, %(event_type)s, %(payload)b, 'completed',
       now() - interval '1 hour', now() - interval '1 hour', NULL, now(), 1,
       md5(g::text), g, 'history', now() - interval '1 hour' + g * interval '1 microsecond', 'applied'
FROM generate_series(1, %(rows)s) AS g
"""


async def insert_history(url: str, rows: int) -> dict[str, float]:
    """Bulk-inserts `rows` COMPLETED events, then VACUUM (ANALYZE); returns how long each took."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        began = time.perf_counter()
        await conn.execute(INSERT_HISTORY, {"rows": rows, "event_type": EVENT_TYPE, "payload": PAYLOAD_BYTES})
        inserted = time.perf_counter()
        # VACUUM as well as ANALYZE: otherwise autovacuum's insert threshold
        # starts a vacuum of the whole table in the middle of the measurement.
        await conn.execute("VACUUM (ANALYZE) inbox_events")
        vacuumed = time.perf_counter()
        cur = await conn.execute("SELECT pg_total_relation_size('inbox_events'), pg_relation_size('inbox_events')")
        sizes = await cur.fetchone()
    assert sizes is not None
    return {
        "insert_s": inserted - began,
        "vacuum_analyze_s": vacuumed - inserted,
        "table_total_mb": sizes[0] / 1024 / 1024,
        "heap_mb": sizes[1] / 1024 / 1024,
    }


async def time_stats_query(url: str) -> float:
    """Seconds the server's periodic Stats refresh (every 15 s) takes on this table."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        began = time.perf_counter()
        await conn.execute(QUERIES["namespace_stats"], {"namespace": None, "now": None})
        return time.perf_counter() - began
