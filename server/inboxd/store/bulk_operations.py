"""Bulk operations in PostgreSQL: start one (its matches numbered), read, list, cancel, and run one chunk.

A chunk is one transaction: it locks the operation's row (a cancel waits
for it, and it sees a committed cancel), changes the next matches after the
cursor that still match and can be acted on (event_bulk_replay,
event_bulk_ignore, event_bulk_copy in operator_actions.sql), and moves the cursor and the
counts in the same transaction: a chunk either happened whole, cursor
included, or not at all, so no match is dealt with twice whoever runs the
next chunk. The chunk that finds no match left ends the operation DONE.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from inboxd.domain.bulk_operations import (
    ACTABLE,
    FIRST_MATCHES,
    BulkAction,
    BulkFilter,
    BulkOperation,
    BulkPosition,
    BulkRequest,
    BulkState,
    Chunk,
    ChunkEvent,
    chunk_size,
    spacing,
)
from inboxd.domain.namespace_patterns import is_glob
from inboxd.domain.operator_views import EventSummary
from inboxd.domain.vocabulary import EventState
from inboxd.store.database import Connection
from inboxd.store.inspection import summary_from_row
from inboxd.store.queries import QUERIES

_NO_ID = uuid.UUID(int=0)
# How long a chunk waits for an event row another transaction holds (bulk_chunk_lock_timeout).
CHUNK_LOCK_TIMEOUT = "2s"
# The cursor's column in an operation's row (bulk_operation_read and its kin).
_CURSOR = 22
# Each action's chunk statement (operator_actions.sql).
_CHUNK_QUERIES = {
    BulkAction.REPLAY: "event_bulk_replay",
    BulkAction.IGNORE: "event_bulk_ignore",
    BulkAction.COPY: "event_bulk_copy",
}


def _operation(row: tuple[Any, ...]) -> BulkOperation:
    (op_id, pattern, event_types, states, accepted_from, accepted_until, error_contains, ordering_key, action,
     reason, rate, dry_run, state, matched, done, skipped, actor, started_at, finished_at, cancelled_by, error,
     elapsed, _cursor, subscription) = row  # fmt: skip
    return BulkOperation(
        id=op_id,
        filter=BulkFilter(
            namespace_pattern=pattern,
            event_types=tuple(event_types),
            states=tuple(EventState(s) for s in states),
            accepted_from=accepted_from,
            accepted_until=accepted_until,
            error_contains=error_contains,
            ordering_key=ordering_key,
        ),
        action=BulkAction(action),
        reason=reason,
        rate=float(rate),
        dry_run=dry_run,
        state=BulkState(state),
        matched=int(matched),
        done=int(done),
        skipped=int(skipped),
        actor=actor,
        started_at=started_at,
        finished_at=finished_at,
        cancelled_by=cancelled_by,
        error=error,
        elapsed=elapsed if isinstance(elapsed, timedelta) else timedelta(0),
        subscription=subscription,
    )


async def _one(conn: Connection, query: str, operation: uuid.UUID, now: datetime | None) -> tuple[Any, ...] | None:
    return await (await conn.execute(QUERIES[query], {"operation": operation, "now": now})).fetchone()


async def start_operation(
    conn: Connection, request: BulkRequest, *, operation: uuid.UUID, actor: str, now: datetime | None = None
) -> tuple[BulkOperation, list[EventSummary]]:
    """Stores the operation and numbers its matches; answers it and its first matches (oldest accepted first).

    A dry run is stored ended (DONE, done 0), its matches counted and dropped: it changes nothing.
    """
    f = request.filter
    states = [s.value for s in f.states]
    params: dict[str, Any] = {
        "operation": operation,
        "namespace_pattern": f.namespace_pattern,
        "like_pattern": f.like_pattern,
        "event_types": list(f.event_types),
        "states": states,
        "accepted_from": f.accepted_from,
        "accepted_until": f.accepted_until,
        "error_contains": f.error_contains,
        "ordering_key": f.ordering_key,
        "action": request.action.value,
        "reason": request.reason,
        "rate": request.rate,
        "dry_run": request.dry_run,
        "subscription": request.subscription,
        "actor": actor,
        "now": now,
    }
    await conn.execute(QUERIES["bulk_operation_insert"], params)
    exact = None if is_glob(f.namespace_pattern) else f.namespace_pattern
    counted = await (
        await conn.execute(QUERIES["bulk_matches_insert"], {"operation": operation, "states": states, "exact": exact})
    ).fetchone()
    assert counted is not None, "a count answers one row"
    await conn.execute(QUERIES["bulk_operation_matched"], {"operation": operation, "matched": int(counted[0])})
    cur = await conn.execute(QUERIES["bulk_first_matches"], {"operation": operation, "limit": FIRST_MATCHES})
    first = [summary_from_row(row) for row in await cur.fetchall()]
    if request.dry_run:
        await conn.execute(QUERIES["bulk_matches_drop"], {"operation": operation})
    row = await _one(conn, "bulk_operation_read", operation, now)
    assert row is not None, "the operation vanished inside its own start"
    return _operation(row), first


async def read_operation(conn: Connection, operation: uuid.UUID, now: datetime | None = None) -> BulkOperation | None:
    row = await _one(conn, "bulk_operation_read", operation, now)
    return None if row is None else _operation(row)


async def list_operations(
    conn: Connection, *, after: BulkPosition | None, limit: int, now: datetime | None = None
) -> list[BulkOperation]:
    """Operations newest first after `after` (None: from the newest)."""
    params = {
        "after_at": after.started_at if after else None,
        "after_id": after.id if after else _NO_ID,
        "limit": limit,
        "now": now,
    }
    return [_operation(row) for row in await (await conn.execute(QUERIES["bulk_operation_list"], params)).fetchall()]


async def running_counts(conn: Connection, actor: str) -> tuple[int, int]:
    """The RUNNING operations `actor` started, and all of them, held true until the caller's transaction ends.

    No other start runs meanwhile (bulk_start_lock), so a start that checks
    the counts and then stores its operation cannot pass a cap beside another.
    """
    await conn.execute(QUERIES["bulk_start_lock"])
    row = await (await conn.execute(QUERIES["bulk_running_counts"], {"actor": actor})).fetchone()
    assert row is not None, "a count answers one row"
    return int(row[0]), int(row[1])


async def ended_operations(conn: Connection, operations: list[uuid.UUID]) -> list[uuid.UUID]:
    """Those of `operations` no longer RUNNING."""
    cur = await conn.execute(QUERIES["bulk_operations_ended"], {"operations": operations})
    return [row[0] for row in await cur.fetchall()]


async def running_operations(conn: Connection) -> list[uuid.UUID]:
    """The ids of the RUNNING operations, oldest first."""
    return [row[0] for row in await (await conn.execute(QUERIES["bulk_operations_running"])).fetchall()]


async def _end(
    conn: Connection,
    operation: uuid.UUID,
    state: BulkState,
    *,
    now: datetime | None,
    cancelled_by: str = "",
    cancel_reason: str = "",
    error: str = "",
) -> None:
    params = {
        "operation": operation,
        "state": state.value,
        "now": now,
        "cancelled_by": cancelled_by,
        "cancel_reason": cancel_reason,
        "error": error,
    }
    await conn.execute(QUERIES["bulk_operation_end"], params)
    await conn.execute(QUERIES["bulk_matches_drop"], {"operation": operation})


async def cancel_operation(
    conn: Connection, operation: uuid.UUID, *, actor: str, reason: str, now: datetime | None = None
) -> BulkOperation | None:
    """RUNNING -> CANCELLED between two chunks (the row lock waits for the one in flight); an ended one as it stands.

    None: no such operation.
    """
    row = await _one(conn, "bulk_operation_lock", operation, now)
    if row is None:
        return None
    if BulkState(row[12]) is BulkState.RUNNING:
        await _end(conn, operation, BulkState.CANCELLED, now=now, cancelled_by=actor, cancel_reason=reason)
        row = await _one(conn, "bulk_operation_read", operation, now)
        assert row is not None, "the locked operation vanished inside its own cancel"
    return _operation(row)


async def fail_operation(conn: Connection, operation: uuid.UUID, error: str, now: datetime | None = None) -> None:
    """RUNNING -> FAILED with the error (a chunk failed for a reason retrying will not fix)."""
    await _end(conn, operation, BulkState.FAILED, now=now, error=error)


async def run_chunk(
    conn: Connection, operation: uuid.UUID, *, largest: int, now: datetime | None = None
) -> tuple[BulkOperation, Chunk | None]:
    """One chunk of a RUNNING operation, in the caller's transaction; answers the operation after it.

    The chunk deals with at most `largest` matches, fewer at a rate (domain.bulk_operations.chunk_size).

    The Chunk is None when there was nothing to do: the operation had ended
    (cancelled, say), or no match was left, and then this ends it DONE.
    """
    row = await _one(conn, "bulk_operation_lock", operation, now)
    if row is None:
        raise LookupError(f"no bulk operation {operation}")
    current = _operation(row)
    if current.state is not BulkState.RUNNING:
        return current, None
    cursor = int(row[_CURSOR])
    query = _CHUNK_QUERIES[current.action]
    limit = chunk_size(current.rate, largest)
    if current.action is not BulkAction.COPY:
        # Matches another transaction holds are waited for, not passed (event_bulk_lock). A COPY
        # changes no match, only reads it: a held row is copied as it stands.
        await conn.execute(QUERIES["bulk_chunk_lock_timeout"], {"timeout": CHUNK_LOCK_TIMEOUT})
        actable = sorted(s.value for s in ACTABLE[current.action])
        await conn.execute(
            QUERIES["event_bulk_lock"], {"operation": operation, "after": cursor, "limit": limit, "states": actable}
        )
    params = {
        "operation": operation,
        "after": cursor,
        "limit": limit,
        "actor": current.actor,
        "reason": current.reason,
        "spacing": spacing(current.rate),
        "now": now,
    }
    rows = await (await conn.execute(QUERIES[query], params)).fetchall()
    read, last = int(rows[0][0]), int(rows[0][1])
    if read == 0:
        await _end(conn, operation, BulkState.DONE, now=now)
        chunk = None
    else:
        events = tuple(ChunkEvent(*r[2:]) for r in rows if r[2] is not None)
        chunk = Chunk(read=read, changed=len(events), last_position=last, events=events)
        advance = {"operation": operation, "cursor": last, "changed": chunk.changed, "skipped": chunk.skipped}
        await conn.execute(QUERIES["bulk_operation_advance"], advance)
    after = await _one(conn, "bulk_operation_read", operation, now)
    assert after is not None, "the locked operation vanished inside its own chunk"
    return _operation(after), chunk
