"""What operators do to events beyond Replay: settle an action, end a claim now, discard an event.

Each request carries what the operator saw when deciding (the action's state
and the claim that wrote it, the claim holding the event, the event's state),
so an act on a view that has moved on is refused, never applied over the new
state. The judgements below are plain functions of what the store read under
its lock; the store runs them and writes the transition with the same fence in
its WHERE clause. Nothing here knows about gRPC or PostgreSQL.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime

from inboxd.domain import validation
from inboxd.domain.errors import InvalidArgument, NotFound, TransitionNotAllowed
from inboxd.domain.vocabulary import ActionState, EventState, FencingToken

# An operator settles what nobody recorded an outcome for; a claim's INTENDED
# with no outcome after it is as uncertain as UNKNOWN once its claim is gone.
SETTLEABLE = frozenset({ActionState.UNKNOWN, ActionState.INTENDED})
SETTLED_OUTCOMES = frozenset({ActionState.SUCCEEDED, ActionState.FAILED})
DISCARDABLE = frozenset({EventState.PENDING, EventState.DEAD_LETTERED})


class OperatorActionKind(enum.StrEnum):
    """The audited operator acts; the SQL CHECK constraint lists the same values."""

    SETTLE_ACTION = "settle_action"
    END_CLAIM = "end_claim"
    DISCARD = "discard"


@dataclass(frozen=True, slots=True)
class OperatorActionRecord:
    """One audited operator act: who, why, when, and what stood before and after, in words."""

    kind: OperatorActionKind
    actor: str
    reason: str
    acted_at: datetime
    subject: str
    before: str
    after: str


def _one_of(field: str, value: enum.Enum, allowed: frozenset[ActionState] | frozenset[EventState]) -> None:
    if value not in allowed:
        names = " or ".join(sorted(s.name for s in allowed))
        raise InvalidArgument(field, f"is {value.name}; use {names}")


def _seen_token(value: int) -> None:
    if value <= 0:
        raise InvalidArgument(
            "expected_fencing_token", "is required: the fencing token you saw, so a view that moved on is refused"
        )


def _identity(namespace: str, event_key: str) -> None:
    validation.check_identity("namespace", namespace)
    validation.check_identity("event_key", event_key)


@dataclass(frozen=True, slots=True)
class Settlement:
    """An operator's outcome for one action, and the action as the operator saw it."""

    namespace: str
    event_key: str
    action: str
    outcome: ActionState
    external_ref: str
    detail: str
    reason: str
    expected_state: ActionState
    expected_fencing_token: FencingToken

    def __post_init__(self) -> None:
        """Raises InvalidArgument naming the first field an operator's adapter (API, console) got wrong."""
        _identity(self.namespace, self.event_key)
        validation.check_identity("action", self.action)
        _one_of("outcome", self.outcome, SETTLED_OUTCOMES)
        validation.check_text("external_ref", self.external_ref, validation.MAX_TEXT_BYTES)
        validation.check_text("detail", self.detail, validation.MAX_TEXT_BYTES)
        validation.required_reason(self.reason)
        _one_of("expected_state", self.expected_state, SETTLEABLE)
        _seen_token(self.expected_fencing_token)


@dataclass(frozen=True, slots=True)
class ClaimEnding:
    """An operator's end of a claim, named by the fencing token the operator saw holding the event."""

    namespace: str
    event_key: str
    expected_fencing_token: FencingToken
    count_attempt: bool
    reason: str

    def __post_init__(self) -> None:
        _identity(self.namespace, self.event_key)
        _seen_token(self.expected_fencing_token)
        validation.required_reason(self.reason)


@dataclass(frozen=True, slots=True)
class Discarding:
    """An operator's discard of an event, in the state the operator saw it in."""

    namespace: str
    event_key: str
    expected_state: EventState
    reason: str

    def __post_init__(self) -> None:
        _identity(self.namespace, self.event_key)
        _one_of("expected_state", self.expected_state, DISCARDABLE)
        validation.required_reason(self.reason)


@dataclass(frozen=True, slots=True)
class EventAsSeen:
    """The event's row as the store read it under its lock, for judging an operator's act."""

    state: EventState
    fencing_token: FencingToken | None
    attempt: int
    worker_id: str


def no_such_action(namespace: str, event_key: str, action: str) -> NotFound:
    return NotFound(f"no action {action!r} in the ledger of event {event_key!r} in namespace {namespace!r}")


def judge_settlement(
    settlement: Settlement, event: EventAsSeen, state: ActionState, fencing_token: FencingToken
) -> None:
    """Raises TransitionNotAllowed unless the action stands as the operator saw it and may be settled."""
    seen = f"{settlement.expected_state.name} by claim {settlement.expected_fencing_token}"
    now = f"{state.name} by claim {fencing_token}"
    if (state, fencing_token) != (settlement.expected_state, settlement.expected_fencing_token):
        raise TransitionNotAllowed(f"the action moved on: you saw it {seen}, it is {now}; look again before settling")
    if state not in SETTLEABLE:
        raise TransitionNotAllowed(f"the action is {state.name}: only UNKNOWN or INTENDED actions can be settled")
    if state is ActionState.INTENDED and event.state is EventState.PROCESSING and event.fencing_token == fencing_token:
        raise TransitionNotAllowed(
            f"the action is INTENDED by claim {fencing_token}, which still holds the event: its worker may be"
            " acting now; end the claim first (EndClaim), or wait for its outcome"
        )


def judge_claim_ending(ending: ClaimEnding, event: EventAsSeen) -> None:
    """Raises TransitionNotAllowed unless the event is PROCESSING under the claim the operator saw."""
    if event.state is not EventState.PROCESSING:
        raise TransitionNotAllowed(
            f"the event is {event.state.name}, not held by claim {ending.expected_fencing_token}: no claim to end"
        )
    if event.fencing_token != ending.expected_fencing_token:
        raise TransitionNotAllowed(
            f"the event moved on: claim {event.fencing_token} holds it now, not claim"
            f" {ending.expected_fencing_token}; look again before ending it"
        )


def judge_discarding(discarding: Discarding, event: EventAsSeen) -> None:
    """Raises TransitionNotAllowed unless the event is still in the (discardable) state the operator saw."""
    if event.state is not discarding.expected_state:
        raise TransitionNotAllowed(
            f"the event moved on: you saw it {discarding.expected_state.name}, it is {event.state.name};"
            " look again before discarding it"
        )
    if event.state not in DISCARDABLE:
        raise TransitionNotAllowed(
            f"the event is {event.state.name}: only PENDING or DEAD_LETTERED events can be discarded"
        )


def word_event(event: EventAsSeen) -> str:
    """The event as an audit row's `before` tells it: its state, the claim holding it, its attempt."""
    if event.state is EventState.PROCESSING:
        worker = event.worker_id or "(unnamed)"
        return f"PROCESSING, claim {event.fencing_token} of worker {worker}, attempt {event.attempt}"
    return f"{event.state.name}, attempt {event.attempt}"


def word_action(state: ActionState, fencing_token: FencingToken, external_ref: str = "") -> str:
    ref = f", external_ref {external_ref!r}" if external_ref else ""
    return f"{state.name} by claim {fencing_token}{ref}"


def attempt_after_ending(ending: ClaimEnding, attempt: int) -> int:
    """The ended claim counts as an attempt, as an expired lease does, or is given back, as Release does."""
    return attempt if ending.count_attempt else max(attempt - 1, 0)
