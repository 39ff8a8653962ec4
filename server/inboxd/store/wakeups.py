"""Whom to wake: which kinds of event the waiting Claims want are due, and what freed ordering keys let out."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from inboxd.domain.namespace_patterns import like_prefix
from inboxd.domain.vocabulary import Wanted
from inboxd.store.database import Connection
from inboxd.store.queries import QUERIES

# Due rows counted per wanted namespace: enough to wake as many waiters.
DUE_CAP = 100


async def due_kinds(
    conn: Connection, wanted: Wanted, now: datetime | None = None, cap: int = DUE_CAP, *, ignore_stale: bool = True
) -> list[tuple[str, str, int]]:
    """(namespace, event_type, due rows up to `cap`) among what the waiters want."""
    in_namespaces = sorted(wanted.in_namespaces)
    by_patterns = sorted(wanted.by_patterns)
    cur = await conn.execute(
        QUERIES["event_due_kinds"],
        {
            "namespaces": [namespace for namespace, _ in in_namespaces],
            "event_types": [event_type for _, event_type in in_namespaces],
            "patterns": [pattern for pattern, _ in by_patterns],
            "prefixes": sorted({like_prefix(pattern) for pattern, _ in by_patterns}),
            "pattern_types": [event_type for _, event_type in by_patterns],
            "anywhere_types": sorted(wanted.anywhere),
            "now": now,
            "cap": cap,
            "ignore_stale": ignore_stale,
        },
    )
    return [(str(namespace), str(event_type), int(count)) for namespace, event_type, count in await cur.fetchall()]


async def next_of_keys(
    conn: Connection, finished: Sequence[tuple[str, str]], now: datetime | None = None, *, ignore_stale: bool = True
) -> list[tuple[str, str, int]]:
    """(namespace, event_type, count) of the events let out now by the keys the `finished` events held.

    `finished`: (namespace, event_key) of events just completed or dead-lettered; unkeyed ones free nothing.
    """
    namespaces, event_keys = zip(*finished, strict=True) if finished else ((), ())
    cur = await conn.execute(
        QUERIES["event_next_of_keys"],
        {"namespaces": list(namespaces), "event_keys": list(event_keys), "now": now, "ignore_stale": ignore_stale},
    )
    return [(str(namespace), str(event_type), int(count)) for namespace, event_type, count in await cur.fetchall()]
