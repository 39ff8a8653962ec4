"""The inbox's vocabulary: states, outcomes and the records that move between layers.

Nothing here knows about gRPC or PostgreSQL; `api/` and `store/` translate to
and from these types.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import NewType

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
    # The canonical JSON text as received; PostgreSQL stores it as jsonb.
    payload_json: str
    metadata: dict[str, str] = field(default_factory=dict)
    message_id: str = ""
    ordering_key: str = ""
    revision: int = 0
    # None: claimable from the moment of acceptance.
    available_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class AcceptResult:
    outcome: AcceptOutcome
    # The stored event's state and acceptance time (the original's on a repeat).
    state: EventState
    accepted_at: datetime
