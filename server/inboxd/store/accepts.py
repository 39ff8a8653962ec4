"""Accepting events: insert-if-absent, judge every repeat, keep conflicting copies: one statement."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any

import psycopg
import psycopg.errors

from inboxd.domain.errors import RefusedEvent, Unavailable
from inboxd.domain.trace_context import TraceContext
from inboxd.domain.validation import DEFAULT_CONTENT_TYPE
from inboxd.domain.vocabulary import AcceptOutcome, AcceptResult, EventState, NewEvent
from inboxd.store.arrays import Byteas, Texts
from inboxd.store.database import Connection, Database
from inboxd.store.queries import QUERIES, execute
from inboxd.store.subscriptions import FanOutMode

# The belief of callers that keep none of their own (tests, tools): see FanOutMode.
PROCESS_MODE = FanOutMode()

# A key another transaction commits while this statement runs is neither
# inserted nor visible to it; those events are simply run again. Each round
# settles every event it sees, so more rounds than this mean a storm of
# concurrent writers on the same keys (or retention deleting them meanwhile).
_ROUNDS = 5

# Built once: json.dumps with any option builds a new encoder per call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_OUTCOMES = {outcome.value: outcome for outcome in AcceptOutcome}
_STATES = {state.value: state for state in EventState}


async def accept_events(
    db: Database,
    events: Sequence[NewEvent],
    now: datetime | None = None,
    *,
    settled: list[AcceptResult | None] | None = None,
    copies: list[tuple[int, str]] | None = None,
    mode: FanOutMode | None = None,
) -> list[AcceptResult]:
    """Accepts `events`; one result per event, in order.

    Each round is one statement on an autocommit connection, so one
    transaction and one round trip: every event it settles is committed with
    all the others of that round or none is. Most groups settle in one round;
    an event whose key another transaction committed meanwhile goes to the
    next round, a transaction of its own. So a failed call may have committed
    the events of its earlier rounds: `settled` (one slot per event, None
    until its round commits) tells the caller which, for its wake-ups, and a
    retry finds them DUPLICATE. A round that loses a deadlock or
    serialization race is run again alone (Database.run), never the rounds
    before it: an event they committed keeps its ACCEPTED.
    `copies`, when given, receives (index of the original, namespace) for
    each subscription's copy that a committed round inserted (fan-out,
    accepts.sql), for the caller to wake their claimers. `mode` says which
    accept statement to try first (None: the process's own): the lean one
    refuses while a subscription stands, and the fanned one then runs.
    `now` is the clock (None: the database's); tests pass it to control time.
    Raises RefusedEvent when PostgreSQL refuses a value (nothing is stored).
    """
    results: list[AcceptResult | None] = [None] * len(events) if settled is None else settled
    todo = list(range(len(events)))
    for _ in range(_ROUNDS):
        todo = await db.run(
            _round(events, todo, results, now, copies=copies, mode=mode or PROCESS_MODE), transaction=False
        )
        if not todo:
            return [r for r in results if r is not None]
    raise Unavailable(f"{len(todo)} events met concurrent writes on their keys {_ROUNDS} times; retry")


def _round(
    events: Sequence[NewEvent],
    todo: list[int],
    results: list[AcceptResult | None],
    now: datetime | None,
    *,
    copies: list[tuple[int, str]] | None,
    mode: FanOutMode,
) -> Callable[[Connection], Awaitable[list[int]]]:
    """One round as a unit of work for Database.run: run again as it is when its transaction rolled back."""

    async def work(conn: Connection) -> list[int]:
        copied: list[tuple[int, str]] = []
        retry = await _accept_round(conn, events, todo, results, now, copied=copied, mode=mode)
        # Only once the round has committed (a rolled-back round runs again from scratch).
        if copies is not None:
            copies.extend(copied)
        return retry

    return work


async def _accept_round(
    conn: Connection,
    events: Sequence[NewEvent],
    todo: list[int],
    results: list[AcceptResult | None],
    now: datetime | None,
    *,
    copied: list[tuple[int, str]],
    mode: FanOutMode,
) -> list[int]:
    if not todo:
        return []  # nothing to accept; and the lean statement's empty answer would read as its refusal
    batch = [events[i] for i in todo]
    params = {
        # One binary array per column (see accepts.sql and store/arrays.py): nothing to escape or parse.
        "namespaces": Texts([e.namespace for e in batch]),
        "event_keys": Texts([e.event_key for e in batch]),
        "event_types": Texts([e.event_type for e in batch]),
        "payloads": Byteas([e.payload for e in batch]),
        "extras": _extras(batch),
        "now": now,
    }
    try:
        rows = await _accept_statement(conn, params, mode)
    except psycopg.errors.ForeignKeyViolation:
        # A conflicting copy's event was deleted (retention) under us: nothing
        # was written; the next round sees the key as new.
        return todo
    except psycopg.DataError as exc:
        raise await _refusal(conn, events, todo, exc) from None
    retry: list[int] = []
    accepted: AcceptResult | None = None
    for pos, outcome, state, accepted_at, traceparent, tracestate in rows:
        if outcome == "copied":  # a subscription's copy of the event at pos; its namespace in that column
            copied.append((todo[pos - 1], traceparent))
        elif pos is None:  # every event of the round not answered by a row of its own (see accepts.sql)
            accepted = AcceptResult(AcceptOutcome.ACCEPTED, _STATES[state], accepted_at)
        elif outcome == "retry":
            retry.append(todo[pos - 1])
        else:
            stored = TraceContext(traceparent, tracestate or "") if traceparent else None
            results[todo[pos - 1]] = AcceptResult(_OUTCOMES[outcome], _STATES[state], accepted_at, stored)
    if accepted is not None:
        waiting = set(retry)
        for index in todo:
            if results[index] is None and index not in waiting:
                results[index] = accepted
    retry.sort()
    return retry


async def _accept_statement(conn: Connection, params: dict[str, Any], mode: FanOutMode) -> list[tuple[Any, ...]]:
    """The rows of the lean accept statement, or, once it refused (or is known to), of the fanned one."""
    if not mode.fanned:
        cur = await execute(conn, "event_accept_many", params, binary=True)
        rows = await cur.fetchall()
        if rows:
            return rows
        # No row for a round with events: refused, nothing written. A subscription stands.
        mode.subscriptions_seen()
    cur = await execute(conn, "event_accept_fanned", params, binary=True)
    return await cur.fetchall()


def _extras(batch: Sequence[NewEvent]) -> str:
    """The fields not at their defaults, as one JSON array of objects by position: most groups send `[]`."""
    rows = [_extra(pos, event) for pos, event in enumerate(batch, start=1) if _has_extras(event)]
    return _ENCODER.encode(rows) if rows else "[]"


def _has_extras(event: NewEvent) -> bool:
    return bool(
        event.metadata
        or event.message_id
        or event.ordering_key
        or event.revision
        or event.available_at is not None
        or not event.payload_is_json
        or event.content_type != DEFAULT_CONTENT_TYPE
        or event.trace_context is not None
    )


def _extra(pos: int, event: NewEvent) -> dict[str, Any]:
    """An event's fields that are not at their defaults, for event_accept_many's extras; the others left out."""
    row: dict[str, Any] = {"pos": pos}
    if event.metadata:
        row["metadata"] = event.metadata
    if event.message_id:
        row["message_id"] = event.message_id
    if event.ordering_key:
        row["ordering_key"] = event.ordering_key
    if event.revision:
        row["revision"] = event.revision
    if event.available_at is not None:
        row["available_at"] = event.available_at.isoformat()
    if event.content_type != DEFAULT_CONTENT_TYPE:
        row["content_type"] = event.content_type
    if not event.payload_is_json:
        row["json"] = False
    if event.trace_context is not None:
        row["traceparent"] = event.trace_context.traceparent
        if event.trace_context.tracestate:
            row["tracestate"] = event.trace_context.tracestate
    return row


async def _refusal(
    conn: Connection, events: Sequence[NewEvent], todo: list[int], exc: psycopg.DataError
) -> RefusedEvent:
    """Names the event whose JSON payload PostgreSQL refused, by trying each alone (nothing is written).

    Validation refuses what jsonb cannot hold before any of it reaches here,
    so this is the net under a disagreement between the two, never INTERNAL.
    """
    for index in todo:
        if not events[index].payload_is_json:
            continue
        try:
            await conn.execute(QUERIES["event_payload_probe"], {"payload": events[index].payload})
        except psycopg.DataError as refused:
            return RefusedEvent(index, "payload", f"PostgreSQL refused it: {refused.diag.message_primary}")
    return RefusedEvent(None, "events", f"PostgreSQL refused a value: {exc.diag.message_primary}")
