"""Accepting events: insert-if-absent, then classify every repeat."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from inboxd.domain import AcceptOutcome, AcceptResult, EventState, NewEvent
from inboxd.store.database import Connection
from inboxd.store.queries import QUERIES

# A key found present by the insert can vanish (retention) before it is read
# back; the insert is then simply tried again.
_VANISHED_RETRIES = 3


async def accept_events(
    conn: Connection, events: Sequence[NewEvent], now: datetime | None = None
) -> list[AcceptResult]:
    """Accepts `events`; one result per event, in order.

    The insert is one statement, so one transaction: on an autocommit
    connection it commits by itself, in one round trip, and every event of
    the batch is in or none is. Repeats are then classified (and conflicting
    copies recorded) in a transaction of their own. `now` is the clock (None:
    the database's); tests pass it to control time.
    """
    results: list[AcceptResult | None] = [None] * len(events)
    todo = list(range(len(events)))
    for _ in range(_VANISHED_RETRIES):
        if not todo:
            break
        todo = await _accept_round(conn, events, todo, results, now)
    if todo:
        raise RuntimeError(f"{len(todo)} events vanished between insert and read-back {_VANISHED_RETRIES} times")
    return [r for r in results if r is not None]


async def _accept_round(
    conn: Connection,
    events: Sequence[NewEvent],
    todo: list[int],
    results: list[AcceptResult | None],
    now: datetime | None,
) -> list[int]:
    batch = [events[i] for i in todo]
    cur = await conn.execute(
        QUERIES["accept_insert"],
        {
            "namespaces": [e.namespace for e in batch],
            "event_keys": [e.event_key for e in batch],
            "event_types": [e.event_type for e in batch],
            "payloads": [e.payload_json for e in batch],
            "metadata": [json.dumps(e.metadata) for e in batch],
            "message_ids": [e.message_id for e in batch],
            "ordering_keys": [e.ordering_key for e in batch],
            "revisions": [e.revision for e in batch],
            "available_ats": [e.available_at for e in batch],
            "now": now,
        },
    )
    inserted = {(str(ns), str(key)): (state, at) for ns, key, state, at in await cur.fetchall()}

    repeats: list[int] = []
    for i in todo:
        event = events[i]
        row = inserted.pop((event.namespace, event.event_key), None)
        if row is None:
            repeats.append(i)
        else:
            state, accepted_at = row
            results[i] = AcceptResult(AcceptOutcome.ACCEPTED, EventState(str(state)), _instant(accepted_at))
    if not repeats:
        return []
    async with conn.transaction():
        return await _classify_repeats(conn, events, repeats, results, now)


async def _classify_repeats(
    conn: Connection,
    events: Sequence[NewEvent],
    repeats: list[int],
    results: list[AcceptResult | None],
    now: datetime | None,
) -> list[int]:
    cur = await conn.execute(
        QUERIES["accept_compare"],
        {
            "ords": repeats,
            "namespaces": [events[i].namespace for i in repeats],
            "event_keys": [events[i].event_key for i in repeats],
            "event_types": [events[i].event_type for i in repeats],
            "payloads": [events[i].payload_json for i in repeats],
        },
    )
    conflicts: list[NewEvent] = []
    for ord_, state, accepted_at, same in await cur.fetchall():
        i = int(str(ord_))
        outcome = AcceptOutcome.DUPLICATE if same else AcceptOutcome.CONFLICT
        if outcome is AcceptOutcome.CONFLICT:
            conflicts.append(events[i])
        results[i] = AcceptResult(outcome, EventState(str(state)), _instant(accepted_at))
    if conflicts:
        await conn.execute(
            QUERIES["accept_record_conflicts"],
            {
                "namespaces": [e.namespace for e in conflicts],
                "event_keys": [e.event_key for e in conflicts],
                "event_types": [e.event_type for e in conflicts],
                "payloads": [e.payload_json for e in conflicts],
                "metadata": [json.dumps(e.metadata) for e in conflicts],
                "now": now,
            },
        )
    return [i for i in repeats if results[i] is None]


def _instant(value: object) -> datetime:
    assert isinstance(value, datetime)
    return value
