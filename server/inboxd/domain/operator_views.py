"""What operators read about events: summaries, whole records, histories and stats.

Plain values, like `inboxd.domain.vocabulary`: the store fills them, `api/` turns them
into protobuf. Nothing here knows about gRPC or PostgreSQL.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from inboxd.domain.conflict_copies import ConflictOverflow
from inboxd.domain.destinations import DeliveryAttempt
from inboxd.domain.operator_actions import OperatorActionRecord
from inboxd.domain.vocabulary import (
    ActionRecord,
    ActionState,
    Disposition,
    EventKey,
    EventState,
    FencingToken,
    Namespace,
)


@dataclass(frozen=True, slots=True)
class EventSummary:
    """One event without its payload: what a listing shows."""

    namespace: Namespace
    event_key: EventKey
    event_type: str
    state: EventState
    attempt: int
    accepted_at: datetime
    available_at: datetime
    updated_at: datetime
    last_error: str
    # While PROCESSING: the worker holding it and when its lease expires.
    worker_id: str = ""
    lease_expires_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ClaimRecord:
    """One claim of an event and how it ended (outcome "" while it is live)."""

    fencing_token: FencingToken
    worker_id: str
    attempt: int
    claimed_at: datetime
    ended_at: datetime | None
    outcome: str


@dataclass(frozen=True, slots=True)
class ConflictingCopy:
    """A copy that arrived under an existing key with another type or payload."""

    event_type: str
    # The bytes as received (a copy kept before migration 0019: jsonb's
    # rendering); None once payload retention dropped it, or when the read did
    # not ask for payloads.
    payload: bytes | None
    metadata: dict[str, str]
    received_at: datetime
    # The payload's SHA-256 and size as kept, to tell copies apart unread (None for copies kept before 0015).
    payload_sha256: bytes | None = None
    payload_bytes: int | None = None
    content_type: str = "application/json"


@dataclass(frozen=True, slots=True)
class ActionHistoryEntry:
    """One record an action received; `applied` is False when it changed nothing."""

    action: str
    state: ActionState
    external_ref: str
    detail: str
    fencing_token: FencingToken
    applied: bool
    recorded_at: datetime


@dataclass(frozen=True, slots=True)
class ReplayRecord:
    """One audited Replay: who, why, from which state, when."""

    actor: str
    reason: str
    state_before: EventState
    replayed_at: datetime


@dataclass(frozen=True, slots=True)
class EventRecord:
    """The whole record of one event, for an operator at 3 a.m."""

    summary: EventSummary
    # The bytes as accepted (an event from before migration 0019: jsonb's
    # rendering); None once payload retention dropped it.
    payload: bytes | None
    content_type: str
    metadata: dict[str, str]
    message_id: str
    ordering_key: str
    revision: int
    disposition: Disposition | None
    disposition_reason: str
    lease_expires_at: datetime | None
    completed_at: datetime | None
    actions: tuple[ActionRecord, ...] = ()
    conflicts: tuple[ConflictingCopy, ...] = ()
    claims: tuple[ClaimRecord, ...] = ()
    replays: tuple[ReplayRecord, ...] = ()
    # SettleAction, EndClaim and Discard, audited, oldest first.
    operator_actions: tuple[OperatorActionRecord, ...] = ()
    # PENDING behind another event of its ordering key: that event's key.
    blocked_by: str | None = None
    action_history: tuple[ActionHistoryEntry, ...] = ()
    # Every conflicting copy the key received: kept (`conflicts` is one page of them) and counted only.
    conflict_count: int = 0
    conflicts_overflow: ConflictOverflow | None = None
    # The last copy of this page when more kept copies follow it, else None.
    conflicts_continue_after: int | None = None
    # Every POST a destination made of it, oldest first (domain/destinations.py).
    deliveries: tuple[DeliveryAttempt, ...] = ()


@dataclass(frozen=True, slots=True)
class ListPosition:
    """Where a listing stopped: the last event shown, in its newest-first order."""

    accepted_at: datetime
    namespace: str
    event_key: str


@dataclass(frozen=True, slots=True)
class ListNarrowing:
    """Filters a listing beyond namespace and state (the console's): None means any."""

    event_type: str | None = None
    key_prefix: str | None = None
    # SQL LIKE patterns (Caller.like_patterns): a listing that names no
    # namespace shows only the namespaces a token is granted.
    namespace_patterns: tuple[str, ...] = ("%",)


@dataclass(frozen=True, slots=True)
class EventPage:
    events: list[EventSummary]
    # None on the last page.
    next_position: ListPosition | None


@dataclass(frozen=True, slots=True)
class NamespaceStats:
    """One namespace's health: what an operator looks at first."""

    namespace: str
    pending: int = 0
    processing: int = 0
    completed: int = 0
    dead_lettered: int = 0
    # Age of the oldest PENDING event claimable now (available_at <= now),
    # measured from available_at; None when nothing is claimable.
    oldest_claimable_age: timedelta | None = None
    # UNKNOWN actions plus INTENDED ones older than settings.action_stale_after.
    unresolved_actions: int = 0
    # Ordering keys whose claimable-now PENDING events wait behind another
    # event of the key, and how long the oldest of those has waited (from its
    # available_at); None when no key is blocked.
    blocked_ordering_keys: int = 0
    oldest_blocked_age: timedelta | None = None
    # Distinct workers with a live Work stream covering the namespace, in any
    # server process or replica (domain/presence.py: as fresh as its period).
    connected_workers: int = 0
    # The flow-control rule that governs the namespace ("": none) and whether
    # it pauses it (domain/flow_rules.py).
    paused: bool = False
    flow_rule: str = ""


@dataclass(frozen=True, slots=True)
class RetentionCounts:
    """What one retention pass did."""

    rows_deleted: int = 0
    payloads_dropped: int = 0


def format_age(value: timedelta | None) -> str:
    """An age as operators read it, in the admin CLI and the console alike: 3d4h, 2h5m, 4m12s, 7s; "-" when absent."""
    if value is None:
        return "-"
    seconds = int(value.total_seconds())
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h"
    if hours:
        return f"{hours}h{minutes}m"
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"
