"""Presence of Work streams in PostgreSQL: a process's rows replaced whole, and the workers counted per namespace.

SQL in queries/presence.sql; the rules (period, freshness) in domain/presence.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from inboxd.domain.presence import PRESENCE_FORGET_AFTER, PRESENCE_FRESH_FOR, PresenceRow
from inboxd.store.database import Connection
from inboxd.store.queries import QUERIES


async def replace_presence(
    conn: Connection, process_id: str, rows: Sequence[PresenceRow], now: datetime | None = None
) -> None:
    """Makes `rows` the whole of this process's presence, in one statement (none: the process has no streams)."""
    await conn.execute(
        QUERIES["presence_replace"],
        {
            "process_id": process_id,
            "worker_ids": [r.worker_id for r in rows],
            "covers": [r.covers.value for r in rows],
            "targets": [r.target for r in rows],
            "streams": [r.streams for r in rows],
            "held": [r.held for r in rows],
            "forget_after": PRESENCE_FORGET_AFTER,
            "now": now,
        },
    )


async def connected_workers(
    conn: Connection, namespaces: Sequence[str], now: datetime | None = None, fresh_for: timedelta = PRESENCE_FRESH_FOR
) -> dict[str, int]:
    """The distinct workers with a live Work stream covering each namespace (absent: none)."""
    if not namespaces:
        return {}
    cur = await conn.execute(
        QUERIES["presence_connected_workers"], {"namespaces": list(namespaces), "now": now, "fresh_for": fresh_for}
    )
    return {str(ns): int(count) for ns, count in await cur.fetchall()}
