"""Claims and the fenced transitions after them: one function per transition.

Each write names the claim token in its WHERE clause. When it matches no
row, `_refusal` says why, in the design's order: the event's identity
(NotFound), then the token (ClaimSuperseded).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg.errors

from inboxd.domain.backoff import FailureDecision
from inboxd.domain.errors import ClaimSuperseded, InboxError, NotFound, Unavailable
from inboxd.domain.namespace_patterns import like_prefix
from inboxd.domain.trace_context import TraceContext
from inboxd.domain.vocabulary import (
    ActionRecord,
    ActionState,
    ClaimBatch,
    ClaimedEvent,
    ClaimRequest,
    ClaimToken,
    Completion,
    EventKey,
    EventState,
    Fence,
    FencingToken,
    Namespace,
    Turn,
)
from inboxd.store import queries
from inboxd.store.database import Connection
from inboxd.store.queries import QUERIES

SUPERSEDED = "claim superseded: this claim token is not the current claim of the event"


async def claim_events(
    conn: Connection,
    request: ClaimRequest,
    *,
    max_attempts: int,
    max_bytes: int,
    now: datetime | None = None,
    ignore_stale: bool = True,
    after: str = "",
) -> ClaimBatch:
    """Leases up to request.max_events due events, taking the namespaces in turn from after `after`.

    The answer stays within `max_bytes` (the first event goes whatever its
    size); those left out stay due, their attempts not counted. Flow-control
    rules bind it in the statement (store/queries/claims.sql).
    """
    patterns = request.namespace_patterns
    every_namespace = not request.namespaces and not patterns
    namespaces = sorted(set(request.namespaces))
    params: dict[str, Any] = {
        "namespaces": namespaces,
        "event_types": list(request.event_types),
        "namespace_patterns": list(patterns),
        "prefixes": [""] if every_namespace else disjoint_prefixes(like_prefix(p) for p in patterns),
        "after": after,
        "turn_limit": request.max_events + TURN_SLACK,
        "max_events": request.max_events,
        "lease": request.lease,
        "worker_id": request.worker_id,
        "max_attempts": max_attempts,
        "max_bytes": max_bytes,
        "now": now,
        "ignore_stale": ignore_stale,
    }
    rows: list[Any] = []
    if len(namespaces) == 1 and not patterns:
        # One named namespace: the plain claim, unless a rule governs it (then it claims nothing and says so).
        rows = await (await queries.execute(conn, "event_claim_one", params)).fetchall()
    if not rows or rows[0][-1]:
        rows = await (await queries.execute(conn, "event_claim", params)).fetchall()
    events = [_claimed_event(row, row[_LEDGER] or ()) for row in rows if row[0] is not None]
    (ignored_stale, dead_lettered_in, leases_expired, turn_end, turn_cut, throttled_rules, throttled_namespaces,
     throttled_by, next_token_at, _given_back, _governed) = rows[0][_LEDGER + 1:]  # fmt: skip
    held_back = list(zip(throttled_rules, throttled_by, throttled_namespaces, strict=True))
    return ClaimBatch(
        events,
        leases_expired=int(leases_expired),
        ignored_stale=int(ignored_stale),
        full=len(events) >= request.max_events,
        dead_lettered_in=tuple(str(ns) for ns in dead_lettered_in),
        turn=Turn(
            ended_at=last_served(events, after) or turn_end or "",
            cut_short=bool(turn_cut),
            # Another Claim held a namespace's lock: not a rule's throttle, a moment's wait (store/claim_waits.py).
            throttled=tuple(held for held in held_back if held[1] != BUSY),
            busy=tuple(namespace for _rule, reason, namespace in held_back if reason == BUSY),
            next_token_at=next_token_at,
        ),
    )


# How a turn says that another Claim held a namespace's lock (migration 0027's held_back).
BUSY = "busy"
# A turn looks at up to max_events + TURN_SLACK namespaces with open events,
# so that namespaces whose events are all leased or delayed do not make a
# Claim come back empty while others further round the ring have some due.
TURN_SLACK = 16
# Where the claim statement's action ledger sits in a row: after the claimed event's 23 columns.
_LEDGER = 23


def last_served(events: Sequence[ClaimedEvent], after: str) -> str | None:
    """The namespace served last in ring order (those after `after` first, in byte order, then the rest)."""
    served = {event.namespace for event in events}
    if not served:
        return None
    return max(served, key=lambda ns: (ns.encode() <= after.encode(), ns.encode()))


def disjoint_prefixes(prefixes: Iterable[str]) -> list[str]:
    """The literal prefixes to walk, none inside another: a walk from "a/" covers "a/b/"'s namespaces too."""
    kept: list[str] = []
    for prefix in sorted(set(prefixes)):
        if not kept or not prefix.startswith(kept[-1]):
            kept.append(prefix)
    return kept


def _claimed_event(row: Sequence[Any], ledger: Sequence[dict[str, Any]]) -> ClaimedEvent:
    (namespace, event_key, event_type, payload, metadata, message_id, ordering_key, revision,
     attempt, claim_token, fencing_token, lease_expires_at, accepted_at, last_error,
     applied_revision, stale, content_type, traceparent, tracestate, replayed) = row[:20]  # fmt: skip
    return ClaimedEvent(
        namespace=Namespace(namespace),
        event_key=EventKey(event_key),
        event_type=event_type,
        payload=payload,
        metadata=dict(metadata or {}),
        message_id=message_id,
        ordering_key=ordering_key,
        revision=revision,
        attempt=attempt,
        claim_token=ClaimToken(claim_token),
        fencing_token=FencingToken(fencing_token),
        lease_expires_at=lease_expires_at,
        accepted_at=accepted_at,
        last_error=last_error,
        actions=tuple(_ledger_entry(entry) for entry in ledger),
        applied_revision=applied_revision,
        stale=stale,
        content_type=content_type,
        trace_context=TraceContext(traceparent, tracestate or "") if traceparent else None,
        replayed=replayed,
    )


def _ledger_entry(entry: dict[str, Any]) -> ActionRecord:
    """One action of the JSON ledger the claim statement returns (jsonb: timestamps are ISO 8601 text)."""
    return action_record(
        (
            entry["action"],
            entry["state"],
            entry["idempotency_key"],
            entry["external_ref"],
            entry["detail"],
            entry["fencing_token"],
            datetime.fromisoformat(entry["updated_at"]),
        )
    )


def action_record(row: Sequence[Any]) -> ActionRecord:
    action, state, idempotency_key, external_ref, detail, fencing_token, updated_at = row
    return ActionRecord(
        action=action,
        state=ActionState(state),
        idempotency_key=idempotency_key,
        external_ref=external_ref,
        detail=detail,
        fencing_token=FencingToken(fencing_token),
        updated_at=updated_at,
    )


async def _refusal(conn: Connection, fence: Fence) -> InboxError:
    """Why a fenced write matched nothing: no such event, or a claim that is not current."""
    cur = await conn.execute(
        QUERIES["event_fence_diagnose"], {"namespace": fence.namespace, "event_key": fence.event_key}
    )
    row = await cur.fetchone()
    if row is None:
        return NotFound.event(fence.namespace, fence.event_key)
    return ClaimSuperseded(f"{SUPERSEDED} (the event is {EventState(row[0]).name} now)")


def _fence_params(fence: Fence, now: datetime | None) -> dict[str, Any]:
    return {
        "namespace": fence.namespace,
        "event_key": fence.event_key,
        "claim_token": fence.claim_token,
        "now": now,
    }


async def renew_lease(conn: Connection, fence: Fence, lease: timedelta, now: datetime | None = None) -> datetime:
    cur = await conn.execute(QUERIES["event_renew_lease"], {**_fence_params(fence, now), "lease": lease})
    row = await cur.fetchone()
    if row is None:
        raise await _refusal(conn, fence)
    expires: datetime = row[0]
    return expires


class RowLocked(Unavailable):
    """Another transaction holds the event's row (a worker's own, say); this completion changed nothing."""

    @classmethod
    def of(cls, fence: Fence, more: str = "") -> RowLocked:
        return cls(f"event {fence.event_key!r} in namespace {fence.namespace!r} is locked by another transaction{more}")


def _completion_params(completions: Sequence[Completion], now: datetime | None) -> dict[str, Any]:
    return {
        "namespaces": [c.fence.namespace for c in completions],
        "event_keys": [c.fence.event_key for c in completions],
        "claim_tokens": [c.fence.claim_token for c in completions],
        "dispositions": [c.disposition.value for c in completions],
        "reasons": [c.reason for c in completions],
        "now": now,
    }


def _completion_outcome(answer: str, completion: Completion) -> InboxError | None:
    fence = completion.fence
    if answer in ("completed", "already_completed"):
        return None
    if answer == "not_found":
        return NotFound.event(fence.namespace, fence.event_key)
    if answer == "locked":
        return RowLocked.of(fence)
    return ClaimSuperseded(SUPERSEDED)


async def complete_events(
    conn: Connection, completions: Sequence[Completion], now: datetime | None = None
) -> list[InboxError | None]:
    """Completes many claims in one statement; per request None (done, or already done by this very
    claim) or its refusal. A row another transaction holds is not waited for: RowLocked."""
    cur = await conn.execute(QUERIES["event_complete_many"], _completion_params(completions, now))
    answers = {int(ord_): str(answer) for ord_, answer in await cur.fetchall()}
    # A repeat's OK ('already_completed') is as durable as the first: the
    # statement locks the row it reads (FOR NO KEY UPDATE), and PostgreSQL
    # logs a row lock in WAL under a transaction id, so this COMMIT waits for
    # a synchronous standby as a write's does (test_synchronous_commit.py).
    return [_completion_outcome(answers[i], c) for i, c in enumerate(completions, start=1)]


async def complete_event_waiting(
    conn: Connection, completion: Completion, lock_timeout: timedelta, now: datetime | None = None
) -> InboxError | None:
    """Completes one claim, waiting up to `lock_timeout` for its row; RowLocked if it is still held."""
    milliseconds = max(1, round(lock_timeout.total_seconds() * 1000))
    await conn.execute(QUERIES["event_complete_lock_timeout"], {"lock_timeout": f"{milliseconds}ms"})
    fence = completion.fence
    params = {
        **_fence_params(fence, now),
        "disposition": completion.disposition.value,
        "reason": completion.reason,
    }
    try:
        # A savepoint: a lock timeout ends it alone, and the transaction still commits cleanly.
        async with conn.transaction():
            # Locks the row as event_complete_many does: a repeat's COMMIT waits for a standby too.
            cur = await conn.execute(QUERIES["event_complete_waiting"], params)
            row = await cur.fetchone()
    except psycopg.errors.LockNotAvailable:
        return RowLocked.of(
            fence,
            f" (a worker's own transaction that called inboxd_complete(), say) for over"
            f" {lock_timeout.total_seconds():.2f} s; nothing changed, retry",
        )
    assert row is not None
    return _completion_outcome(str(row[0]), completion)


async def lock_for_failure(conn: Connection, fence: Fence) -> int:
    """Locks the current claim's row and returns its attempt number."""
    cur = await conn.execute(QUERIES["event_fail_lock"], _fence_params(fence, None))
    row = await cur.fetchone()
    if row is None:
        raise await _refusal(conn, fence)
    attempt: int = row[0]
    return attempt


@dataclass(frozen=True, slots=True)
class Failed:
    """A failure applied: when the retry is due (None: dead-lettered), and whom that may wake."""

    next_at: datetime | None
    event_type: str
    ordering_key: str


async def fail_event(
    conn: Connection, fence: Fence, decision: FailureDecision, error: str, now: datetime | None = None
) -> Failed:
    """Applies a failure decision."""
    # No delay is the decision to dead-letter (FailureDecision.delay is None exactly then).
    delay = None if decision.state is EventState.DEAD_LETTERED else decision.delay
    cur = await conn.execute(QUERIES["event_fail"], {**_fence_params(fence, now), "error": error, "delay": delay})
    row = await cur.fetchone()
    if row is None:
        raise await _refusal(conn, fence)
    return Failed(row[0], str(row[1]), str(row[2]))


async def release_events(
    conn: Connection, fences: Sequence[Fence], now: datetime | None = None
) -> list[tuple[str, str, str]]:
    """Hands claims back without counting their attempts; returns (namespace, key, type) released."""
    cur = await conn.execute(
        QUERIES["event_release_many"],
        {
            "namespaces": [f.namespace for f in fences],
            "event_keys": [f.event_key for f in fences],
            "claim_tokens": [f.claim_token for f in fences],
            "now": now,
        },
    )
    return [(row[0], row[1], row[2]) for row in await cur.fetchall()]


async def release_event(conn: Connection, fence: Fence, now: datetime | None = None) -> tuple[str, str, str]:
    released = await release_events(conn, [fence], now)
    if not released:
        raise await _refusal(conn, fence)
    return released[0]
