"""Retention in the database: bounded batches, one replica at a time (store/advisory.py).

Each batch is its own short transaction, so a pass over a large backlog never
holds row locks for long.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, LiteralString

from inboxd.domain.operator_views import RetentionCounts
from inboxd.store.advisory import AsyncConnection, alone
from inboxd.store.queries import QUERIES

# Any fixed number; it names "inboxd retention" among the cluster's advisory locks.
RETENTION_LOCK = 7_311_002
BATCH_SIZE = 1000


async def apply_retention(
    conninfo: str,
    *,
    retention: timedelta,
    payload_retention: timedelta | None,
    now: datetime | None = None,
    batch_size: int = BATCH_SIZE,
    namespace: str | None = None,
) -> RetentionCounts | None:
    """Deletes expired COMPLETED rows, then drops expired payloads; None when another replica holds the lock.

    `namespace` confines the pass to one namespace; tests use it so that a
    far-future `now` touches only their own rows.
    """
    params: dict[str, Any] = {
        "now": now,
        "retention": retention,
        "payload_retention": payload_retention,
        "namespace": namespace,
        "batch_size": batch_size,
    }
    async with alone(conninfo, RETENTION_LOCK, "retention") as conn:
        if conn is None:
            return None
        # Deleting first spares dropping payloads of rows about to go.
        deleted = await _in_batches(conn, QUERIES["event_delete_completed"], params, batch_size)
        # Destinations' attempts of the events gone (they have no foreign key to hold them: migration 0029).
        await _in_batches(conn, QUERIES["retention_delete_delivery_attempts"], params, batch_size)
        dropped = 0
        if payload_retention is not None:
            dropped = await _in_batches(conn, QUERIES["retention_drop_payloads"], params, batch_size)
            # Copies that came after their event's payload went; not counted as
            # payloads of COMPLETED rows (the metric's meaning).
            await _in_batches(conn, QUERIES["retention_drop_late_copies"], params, batch_size)
    return RetentionCounts(rows_deleted=deleted, payloads_dropped=dropped)


async def _in_batches(conn: AsyncConnection, query: LiteralString, params: dict[str, Any], batch_size: int) -> int:
    """Runs a one-batch statement until a batch comes back short; returns the rows it touched."""
    total = 0
    while True:
        async with conn.transaction():
            cur = await conn.execute(query, params)
            row = await cur.fetchone() if cur.description else None
            count = int(row[0]) if row is not None else max(cur.rowcount, 0)
        total += count
        if count < batch_size:
            return total
