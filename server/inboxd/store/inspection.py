"""Reading events for operators: one whole record, paged summaries, per-namespace stats."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from inboxd.domain.conflict_copies import FIRST_PAGE, ConflictOverflow, ConflictWindow
from inboxd.domain.operator_views import (
    ClaimRecord,
    ConflictingCopy,
    EventPage,
    EventRecord,
    EventSummary,
    ListNarrowing,
    ListPosition,
    NamespaceStats,
    ReplayRecord,
)
from inboxd.domain.vocabulary import Disposition, EventKey, EventState, FencingToken, Namespace
from inboxd.store import presence
from inboxd.store.actions import action_history, unresolved_actions
from inboxd.store.claims import action_record
from inboxd.store.database import Connection
from inboxd.store.destinations import attempts_of_event
from inboxd.store.operator_actions import operator_actions
from inboxd.store.queries import QUERIES


async def read_event(
    conn: Connection, namespace: str, event_key: str, conflicts_window: ConflictWindow = FIRST_PAGE
) -> EventRecord | None:
    """The whole record of one event with its histories and one page of its conflicting copies; None: no such event."""
    key = {"namespace": namespace, "event_key": event_key}
    cur = await conn.execute(QUERIES["event_read"], key)
    row = await cur.fetchone()
    if row is None:
        return None
    (payload, metadata, message_id, ordering_key, revision,
     disposition, disposition_reason, lease_expires_at, completed_at, content_type) = row[9:]  # fmt: skip
    actions = await conn.execute(
        QUERIES["action_list_for_events"], {"namespaces": [namespace], "event_keys": [event_key]}
    )
    claims = await conn.execute(QUERIES["event_claims"], key)
    window = {
        **key,
        "after_id": conflicts_window.after_id,
        "page_size": conflicts_window.page_size,
        "with_payloads": conflicts_window.with_payloads,
    }
    copies = await (await conn.execute(QUERIES["event_conflicts"], window)).fetchall()
    more = len(copies) > conflicts_window.page_size
    copies = copies[: conflicts_window.page_size]
    totals = await (await conn.execute(QUERIES["event_conflict_totals"], key)).fetchone()
    assert totals is not None, "one row, always"
    kept, overflow_copies, first_at, last_at, last_digest = totals
    replays = await conn.execute(QUERIES["event_replays"], key)
    history = await action_history(conn, namespace, event_key)
    deliveries = await attempts_of_event(conn, namespace, event_key)
    return EventRecord(
        summary=summary_from_row(row[:9]),
        payload=payload,
        content_type=content_type,
        metadata=dict(metadata or {}),
        message_id=message_id,
        ordering_key=ordering_key,
        revision=revision,
        disposition=Disposition(disposition) if disposition else None,
        disposition_reason=disposition_reason,
        lease_expires_at=lease_expires_at,
        completed_at=completed_at,
        actions=tuple(action_record(r[2:]) for r in await actions.fetchall()),
        claims=tuple(
            ClaimRecord(FencingToken(fencing), worker, attempt, claimed_at, ended_at, outcome)
            for fencing, worker, attempt, claimed_at, ended_at, outcome in await claims.fetchall()
        ),
        conflicts=tuple(
            ConflictingCopy(event_type, copy, dict(meta or {}), received_at, digest, size, content_type)
            for _, event_type, copy, meta, received_at, digest, size, content_type in copies
        ),
        conflict_count=kept + (overflow_copies or 0),
        conflicts_overflow=(
            None
            if overflow_copies is None
            else ConflictOverflow(overflow_copies, first_at, last_at, bytes(last_digest))
        ),
        conflicts_continue_after=copies[-1][0] if more else None,
        deliveries=tuple(deliveries),
        replays=tuple(
            ReplayRecord(actor, reason, EventState(before), at)
            for actor, reason, before, at in await replays.fetchall()
        ),
        action_history=tuple(history),
        operator_actions=await operator_actions(conn, namespace, event_key),
        blocked_by=await _blocked_by(conn, key) if ordering_key else None,
    )


def summary_from_row(row: Sequence[Any]) -> EventSummary:
    """A listing's row (with the worker and lease expiry) or the first nine columns of event_read's."""
    namespace, event_key, event_type, state, attempt, accepted_at, available_at, updated_at, last_error = row[:9]
    worker_id, lease_expires_at = row[9:11] if len(row) > 9 else ("", None)
    return EventSummary(
        namespace=Namespace(namespace),
        event_key=EventKey(event_key),
        event_type=event_type,
        state=EventState(state),
        attempt=attempt,
        accepted_at=accepted_at,
        available_at=available_at,
        updated_at=updated_at,
        last_error=last_error,
        worker_id=worker_id,
        lease_expires_at=lease_expires_at,
    )


async def _blocked_by(conn: Connection, key: dict[str, str]) -> str | None:
    """The event a PENDING keyed event waits behind (holding its key, or before it in order); None: nobody."""
    row = await (await conn.execute(QUERIES["ordering_key_blocker"], key)).fetchone()
    return None if row is None or row[0] is None else str(row[0])


async def list_events(
    conn: Connection,
    *,
    namespace: str | None,
    states: Sequence[EventState],
    after: ListPosition | None,
    page_size: int,
    narrowing: ListNarrowing | None = None,
) -> EventPage:
    """One page of summaries, newest first (by accepted_at, then namespace and key)."""
    params: dict[str, Any] = {
        "states": [s.value for s in states],
        "after_at": after.accepted_at if after else None,
        "after_namespace": after.namespace if after else "",
        "after_key": after.event_key if after else "",
        # One more than asked tells whether another page follows.
        "limit": page_size + 1,
    }
    narrowing = narrowing or ListNarrowing()
    params |= {
        "event_type": narrowing.event_type,
        "key_prefix": narrowing.key_prefix,
        "namespace_patterns": list(narrowing.namespace_patterns),
    }
    if namespace is None:
        cur = await conn.execute(QUERIES["event_list_everywhere"], params)
    else:
        cur = await conn.execute(QUERIES["event_list_in_namespace"], {**params, "namespace": namespace})
    summaries = [summary_from_row(row) for row in await cur.fetchall()]
    if len(summaries) <= page_size:
        return EventPage(summaries, None)
    last = summaries[page_size - 1]
    return EventPage(summaries[:page_size], ListPosition(last.accepted_at, last.namespace, last.event_key))


async def _fold_turn(conn: Connection) -> bool:
    row = await (await conn.execute(QUERIES["state_counts_fold_turn"])).fetchone()
    return bool(row and row[0])


async def namespace_stats(
    conn: Connection, *, namespace: str | None, action_stale_after: timedelta, now: datetime | None = None
) -> list[NamespaceStats]:
    """Counts per state, oldest claimable age, unresolved actions, connected workers and the governing flow rule."""
    if await _fold_turn(conn):
        await conn.execute(QUERIES["state_counts_fold"])
    cur = await conn.execute(QUERIES["namespace_stats"], {"namespace": namespace, "now": now})
    rows = await cur.fetchall()
    unresolved = {
        u.namespace: u.unknown + u.stale_intended
        for u in await unresolved_actions(conn, stale_after=action_stale_after, namespace=namespace, now=now)
    }
    blocked_cur = await conn.execute(QUERIES["ordering_key_blocked_count"], {"namespace": namespace, "now": now})
    blocked: dict[str, tuple[int, timedelta]] = {
        ns: (int(keys), max(age, timedelta(0))) for ns, keys, age in await blocked_cur.fetchall()
    }
    workers = await presence.connected_workers(conn, [row[0] for row in rows], now)
    return [
        NamespaceStats(
            namespace=ns,
            pending=pending,
            processing=processing,
            completed=completed,
            dead_lettered=dead,
            oldest_claimable_age=max(age, timedelta(0)) if age is not None else None,
            unresolved_actions=unresolved.get(ns, 0),
            blocked_ordering_keys=blocked[ns][0] if ns in blocked else 0,
            oldest_blocked_age=blocked[ns][1] if ns in blocked else None,
            connected_workers=workers.get(ns, 0),
            paused=paused,
            flow_rule=flow_rule,
        )
        for ns, pending, processing, completed, dead, age, paused, flow_rule in rows
    ]
