"""The inbox's vocabulary: states, outcomes and the records that move between layers.

Nothing here knows about gRPC or PostgreSQL; `api/` and `store/` translate to
and from these types.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import NewType

from inboxd.domain.trace_context import TraceContext

Namespace = NewType("Namespace", str)
EventKey = NewType("EventKey", str)
ClaimToken = NewType("ClaimToken", str)
FencingToken = NewType("FencingToken", int)


class EventState(enum.StrEnum):
    """The one state machine of an event; the SQL CHECK constraint lists the same values."""

    PENDING = "pending"
    PROCESSING = "processing"
    COMPLETED = "completed"
    DEAD_LETTERED = "dead_lettered"


class AcceptOutcome(enum.StrEnum):
    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    CONFLICT = "conflict"


class Disposition(enum.StrEnum):
    APPLIED = "applied"
    IGNORED = "ignored"


class StaleRevisions(enum.StrEnum):
    """What a Claim does with an event at or below its ordering key's applied revision."""

    # Completed IGNORED at claim time, with a reason naming both revisions.
    IGNORE = "ignore"
    # Handed out flagged stale; the worker decides.
    DELIVER = "deliver"


class ActionState(enum.StrEnum):
    INTENDED = "intended"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event as an edge hands it in, already validated."""

    namespace: Namespace
    event_key: EventKey
    event_type: str
    # The payload's bytes as received, stored and handed back as they are.
    payload: bytes
    metadata: dict[str, str] = field(default_factory=dict)
    message_id: str = ""
    ordering_key: str = ""
    revision: int = 0
    # None: claimable from the moment of acceptance.
    available_at: datetime | None = None
    content_type: str = "application/json"
    # Whether content_type is a JSON type (validated as JSON; repeats judged as JSON values).
    payload_is_json: bool = True
    # The delivery's trace, stored when this Accept is the event's first.
    trace_context: TraceContext | None = None


@dataclass(frozen=True, slots=True)
class AcceptResult:
    outcome: AcceptOutcome
    # The stored event's state and acceptance time (the original's on a repeat).
    state: EventState
    accepted_at: datetime
    # On a repeat, the stored event's trace context (its first delivery's), for the repeat's span to link to.
    trace_context: TraceContext | None = None


@dataclass(frozen=True, slots=True)
class ActionRecord:
    """One entry of an event's ledger of external actions."""

    action: str
    state: ActionState
    idempotency_key: str
    external_ref: str
    detail: str
    fencing_token: FencingToken
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    """What a worker asks for; already validated and defaulted."""

    namespaces: tuple[str, ...]
    event_types: tuple[str, ...]
    max_events: int
    lease: timedelta
    wait: timedelta
    worker_id: str
    # SQL LIKE patterns: the Claim also takes every namespace one matches (a
    # glob it named, or, naming none, the caller's grants). With neither
    # namespaces nor patterns: every namespace.
    namespace_patterns: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Wanted:
    """What the waiting Claims of a process want, for the due poller's one look: (namespace or pattern, type).

    An empty type means any type; the patterns are SQL LIKE patterns, as in ClaimRequest.
    """

    in_namespaces: frozenset[tuple[str, str]]
    by_patterns: frozenset[tuple[str, str]]
    # Types wanted by waiters that take any namespace ("" for any type).
    anywhere: frozenset[str]

    def __bool__(self) -> bool:
        return bool(self.in_namespaces or self.by_patterns or self.anywhere)


@dataclass(frozen=True, slots=True)
class ClaimedEvent:
    namespace: Namespace
    event_key: EventKey
    event_type: str
    payload: bytes
    metadata: dict[str, str]
    message_id: str
    ordering_key: str
    revision: int
    attempt: int
    claim_token: ClaimToken
    fencing_token: FencingToken
    lease_expires_at: datetime
    accepted_at: datetime
    last_error: str
    actions: tuple[ActionRecord, ...] = ()
    # The highest revision of the ordering key completed as APPLIED (0: none,
    # or no ordering key); stale: this event's revision is at or below it
    # (handed out only when the server delivers stale events).
    applied_revision: int = 0
    stale: bool = False
    content_type: str = "application/json"
    # The context the event's first Accept brought; None when it brought none.
    trace_context: TraceContext | None = None
    # An operator has replayed the event since it was accepted.
    replayed: bool = False


@dataclass(frozen=True, slots=True)
class Turn:
    """One Claim's turn over its namespaces (DESIGN, Flow control): where the next one starts, what held back."""

    # The last namespace it served (or looked at, serving none): the next turn starts after it.
    ended_at: str = ""
    # The walk stopped at its bound before it came round: more namespaces may have due events.
    cut_short: bool = False
    # (rule pattern, "rate" or "max_in_flight", namespace) for each namespace a rule held back.
    throttled: tuple[tuple[str, str, str], ...] = ()
    # When a rate that held events back has its next token (None: no rate did).
    next_token_at: datetime | None = None
    # Limited namespaces this Claim took none of because another Claim held their lock (counting their slots).
    busy: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ClaimBatch:
    """A Claim's result, with what it found on the way for metrics."""

    events: list[ClaimedEvent]
    # Expired leases taken over (the old claim is dead).
    leases_expired: int = 0
    # Stale revisions of an ordering key completed IGNORED instead of handed out.
    ignored_stale: int = 0
    # It took all it was asked for: more may be due.
    full: bool = False
    # The namespace of each event dead-lettered because its attempts ran out.
    dead_lettered_in: tuple[str, ...] = ()
    # Where the Claim's turn over the namespaces ended, and what flow control held back.
    turn: Turn = field(default_factory=Turn)

    @property
    def dead_lettered(self) -> int:
        """How many events this Claim dead-lettered."""
        return len(self.dead_lettered_in)


@dataclass(frozen=True, slots=True)
class Fence:
    """Names the claim a fenced call speaks for."""

    namespace: Namespace
    event_key: EventKey
    claim_token: ClaimToken


@dataclass(frozen=True, slots=True)
class Completion:
    """One Complete: the claim it speaks for, and how the event ends."""

    fence: Fence
    disposition: Disposition
    reason: str


@dataclass(frozen=True, slots=True)
class FailResult:
    state: EventState
    # When the retry becomes claimable; None when dead-lettered.
    next_attempt_at: datetime | None
