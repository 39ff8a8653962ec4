"""The protocol as DESIGN.md states it, small enough to read: what each call must answer.

The state machine in test_protocol_state_machine.py drives the real server and
this model side by side and compares every answer. Nothing here talks to the
server; every rule is a line of DESIGN.md (Event states, Fine print).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import grpc

from inboxd_client.v1 import types_pb2

PENDING = types_pb2.EVENT_STATE_PENDING
PROCESSING = types_pb2.EVENT_STATE_PROCESSING
COMPLETED = types_pb2.EVENT_STATE_COMPLETED
DEAD_LETTERED = types_pb2.EVENT_STATE_DEAD_LETTERED

INTENDED = types_pb2.ACTION_STATE_INTENDED
SUCCEEDED = types_pb2.ACTION_STATE_SUCCEEDED
FAILED = types_pb2.ACTION_STATE_FAILED
UNKNOWN = types_pb2.ACTION_STATE_UNKNOWN

OK = grpc.StatusCode.OK
ABORTED = grpc.StatusCode.ABORTED
FAILED_PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION

# DESIGN.md, Event states: the action state machine.
ACTION_NEXT: dict[int, frozenset[int]] = {
    INTENDED: frozenset({INTENDED, SUCCEEDED, FAILED, UNKNOWN}),
    UNKNOWN: frozenset({SUCCEEDED, FAILED}),
    FAILED: frozenset({INTENDED}),
    SUCCEEDED: frozenset(),
}


@dataclass(frozen=True)
class Claim:
    """A claim as its worker holds it, long after it stopped being current, perhaps."""

    worker: str
    key: str
    token: str
    fencing: int


@dataclass
class Action:
    state: int
    fencing: int
    # Learned from the first answer that minted it; never changes after.
    idempotency_key: str


@dataclass
class Event:
    state: int = PENDING
    attempt: int = 0
    # When a Claim may take it: available_at while PENDING, the lease's end while PROCESSING.
    due: datetime | None = None
    current: Claim | None = None
    completed_by: str | None = None
    action: Action | None = None
    issued: list[Claim] = field(default_factory=list)

    def is_current(self, claim: Claim) -> bool:
        """From its Claim until its claim ends; an expired lease nobody took over is still current."""
        return self.state == PROCESSING and self.current is not None and self.current.token == claim.token


@dataclass
class Inbox:
    max_attempts: int
    lease: timedelta
    events: dict[str, Event] = field(default_factory=dict)

    def due(self, now: datetime) -> list[str]:
        """The events the next Claim (max_events=1) may take: the earliest due, ties in any order."""
        open_ = {k: e.due for k, e in self.events.items() if e.state in (PENDING, PROCESSING) and e.due is not None}
        ready = {k: due for k, due in open_.items() if due <= now}
        if not ready:
            return []
        first = min(ready.values())
        return sorted(k for k, due in ready.items() if due == first)

    def claim(self, claim: Claim, now: datetime) -> None:
        event = self.events[claim.key]
        assert event.attempt < self.max_attempts
        event.state, event.attempt, event.current = PROCESSING, event.attempt + 1, claim
        event.due = now + self.lease
        event.issued.append(claim)

    def dead_letter_at_claim(self, key: str) -> None:
        event = self.events[key]
        assert event.attempt >= self.max_attempts
        event.state, event.current, event.due = DEAD_LETTERED, None, None

    def renew(self, claim: Claim, now: datetime) -> grpc.StatusCode:
        event = self.events[claim.key]
        if not event.is_current(claim):
            return ABORTED
        event.due = now + self.lease
        return OK

    def complete(self, claim: Claim) -> grpc.StatusCode:
        event = self.events[claim.key]
        if event.is_current(claim):
            event.state, event.current, event.due, event.completed_by = COMPLETED, None, None, claim.token
            return OK
        # "Complete repeated with the token that completed the event answers OK."
        return OK if event.state == COMPLETED and event.completed_by == claim.token else ABORTED

    def fail(self, claim: Claim, *, permanent: bool, retry_after: timedelta, now: datetime) -> grpc.StatusCode:
        event = self.events[claim.key]
        if not event.is_current(claim):
            return ABORTED
        event.current = None
        if permanent or event.attempt >= self.max_attempts:
            event.state, event.due = DEAD_LETTERED, None
        else:
            event.state, event.due = PENDING, now + retry_after
        return OK

    def release(self, claim: Claim, now: datetime) -> grpc.StatusCode:
        event = self.events[claim.key]
        if not event.is_current(claim):
            return ABORTED
        # "An attempt is a claim, and Release gives one back."
        event.state, event.current, event.due, event.attempt = PENDING, None, now, event.attempt - 1
        return OK

    def record(self, claim: Claim, state: int) -> grpc.StatusCode:
        """RecordActionOutcome; the answer's record is then `events[key].action`, as it stands."""
        event = self.events[claim.key]
        # Order of checks: identity, then the token, then the state.
        if state == INTENDED and not event.is_current(claim):
            return ABORTED
        action = event.action
        if action is None:
            # An outcome with no INTENDED before it creates the action; the key is minted by the server.
            event.action = Action(state, claim.fencing, idempotency_key="")
            return OK
        if state != INTENDED and claim.fencing < action.fencing:
            # An older claim's outcome: kept in history, answered with the action as it stands;
            # SUCCEEDED is never lost, and is stored with that claim's fencing token.
            if state == SUCCEEDED and action.state != SUCCEEDED:
                action.state, action.fencing = SUCCEEDED, claim.fencing
            return OK
        if state == action.state and state != INTENDED:
            return OK  # a repeat: nothing changes
        if state not in ACTION_NEXT[action.state]:
            return FAILED_PRECONDITION
        action.state, action.fencing = state, claim.fencing
        return OK
