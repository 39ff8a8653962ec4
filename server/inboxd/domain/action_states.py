"""The state machine of an external action in an event's ledger.

INTENDED -> SUCCEEDED | FAILED | UNKNOWN; UNKNOWN -> SUCCEEDED | FAILED;
FAILED -> INTENDED (a retry, same idempotency key); SUCCEEDED is final.

An outcome from a claim older than the one that last wrote the action says
nothing about the newer claim's attempt: it is kept in the action's history and
answered with the action as it stands. SUCCEEDED is the exception: it proves the
effect happened under this key, so it is never lost.
"""

from __future__ import annotations

import enum

from inboxd.domain.errors import TransitionNotAllowed
from inboxd.domain.vocabulary import ActionState

_NEXT: dict[ActionState, frozenset[ActionState]] = {
    # A later claim may declare its intent again: same key, its fencing token stored.
    ActionState.INTENDED: frozenset(
        {ActionState.INTENDED, ActionState.SUCCEEDED, ActionState.FAILED, ActionState.UNKNOWN}
    ),
    ActionState.UNKNOWN: frozenset({ActionState.SUCCEEDED, ActionState.FAILED}),
    ActionState.FAILED: frozenset({ActionState.INTENDED}),
    ActionState.SUCCEEDED: frozenset(),
}


class ActionWrite(enum.Enum):
    """What recording a state does to the ledger row."""

    CREATE = "create"  # first record: the idempotency key is minted
    UPDATE = "update"  # a transition: the state and the recording claim change
    REPEAT = "repeat"  # the outcome is already recorded: answer OK, change nothing
    KEEP = "keep"  # an older claim's outcome: kept in the history only, answer OK as it stands


def plan_action_write(current: ActionState | None, new: ActionState, *, from_older_claim: bool = False) -> ActionWrite:
    """Raises TransitionNotAllowed for a move the state machine forbids.

    from_older_claim: the record comes from a claim older than the one that
    last wrote the action (only outcomes can: INTENDED needs the current claim).
    """
    if current is None:
        return ActionWrite.CREATE
    if from_older_claim and new is not ActionState.INTENDED:
        if new is ActionState.SUCCEEDED and current is not ActionState.SUCCEEDED:
            return ActionWrite.UPDATE
        return ActionWrite.KEEP
    if new is current and new is not ActionState.INTENDED:
        return ActionWrite.REPEAT
    if new in _NEXT[current]:
        return ActionWrite.UPDATE
    if current is ActionState.SUCCEEDED:
        raise TransitionNotAllowed(f"the action already SUCCEEDED, which is final; cannot record {new.name}")
    if current is ActionState.UNKNOWN and new is ActionState.INTENDED:
        raise TransitionNotAllowed(
            "the action's outcome is UNKNOWN: reconcile it first (record SUCCEEDED or FAILED), then retry"
        )
    raise TransitionNotAllowed(f"an action cannot go from {current.name} to {new.name}")
