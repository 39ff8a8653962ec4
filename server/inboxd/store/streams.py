"""A Work stream's statements: the heartbeat over every claim it holds, and their end when it ends.

Each takes the stream's claims whole and runs one statement, fenced by each
claim token in its WHERE clause (queries/streams.sql).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from inboxd.domain.vocabulary import EventState, Fence
from inboxd.store.database import Connection
from inboxd.store.queries import QUERIES


def _held_params(fences: Collection[Fence], now: datetime | None) -> dict[str, Any]:
    return {
        "namespaces": [f.namespace for f in fences],
        "event_keys": [f.event_key for f in fences],
        "claim_tokens": [f.claim_token for f in fences],
        "now": now,
    }


async def renew_held(
    conn: Connection, fences: Collection[Fence], lease: timedelta, now: datetime | None = None
) -> set[tuple[str, str]]:
    """Extends every lease still held under its claim; returns the (namespace, event_key) of those."""
    cur = await conn.execute(QUERIES["event_stream_renew"], {**_held_params(fences, now), "lease": lease})
    return {(str(ns), str(key)) for ns, key in await cur.fetchall()}


@dataclass(frozen=True, slots=True)
class Ended:
    """One claim the stream's end ended: its event and the state it went to."""

    namespace: str
    event_key: str
    event_type: str
    state: EventState
    ordering_key: str


async def end_held(
    conn: Connection, fences: Collection[Fence], *, max_attempts: int, now: datetime | None = None
) -> list[Ended]:
    """Ends the claims still current as an expired lease would; returns what each became."""
    cur = await conn.execute(QUERIES["event_stream_end"], {**_held_params(fences, now), "max_attempts": max_attempts})
    return [
        Ended(str(ns), str(key), str(event_type), EventState(state), str(ordering_key))
        for ns, key, event_type, state, ordering_key in await cur.fetchall()
    ]
