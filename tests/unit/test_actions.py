"""The action state machine, with no database."""

from __future__ import annotations

import pytest

from inboxd.domain.action_states import ActionWrite, plan_action_write
from inboxd.domain.errors import TransitionNotAllowed
from inboxd.domain.vocabulary import ActionState

INT, SUC, FAI, UNK = ActionState.INTENDED, ActionState.SUCCEEDED, ActionState.FAILED, ActionState.UNKNOWN


@pytest.mark.parametrize("new", [INT, SUC, FAI, UNK])
def test_the_first_record_creates_the_action(new: ActionState) -> None:
    assert plan_action_write(None, new) is ActionWrite.CREATE


@pytest.mark.parametrize(
    ("current", "new"), [(INT, SUC), (INT, FAI), (INT, UNK), (INT, INT), (UNK, SUC), (UNK, FAI), (FAI, INT)]
)
def test_allowed_moves_update(current: ActionState, new: ActionState) -> None:
    assert plan_action_write(current, new) is ActionWrite.UPDATE


@pytest.mark.parametrize("state", [SUC, FAI, UNK])
def test_repeating_a_recorded_outcome_changes_nothing(state: ActionState) -> None:
    assert plan_action_write(state, state) is ActionWrite.REPEAT


@pytest.mark.parametrize(("current", "new"), [(SUC, INT), (SUC, FAI), (SUC, UNK), (UNK, INT), (FAI, SUC), (FAI, UNK)])
def test_forbidden_moves_are_refused(current: ActionState, new: ActionState) -> None:
    with pytest.raises(TransitionNotAllowed):
        plan_action_write(current, new)


@pytest.mark.parametrize("current", [INT, FAI, UNK, SUC])
@pytest.mark.parametrize("new", [FAI, UNK])
def test_an_older_claims_outcome_is_kept_without_moving_the_state(current: ActionState, new: ActionState) -> None:
    assert plan_action_write(current, new, from_older_claim=True) is ActionWrite.KEEP


@pytest.mark.parametrize("current", [INT, FAI, UNK])
def test_an_older_claims_success_is_never_lost(current: ActionState) -> None:
    assert plan_action_write(current, SUC, from_older_claim=True) is ActionWrite.UPDATE


def test_an_older_claims_success_on_a_success_changes_nothing() -> None:
    assert plan_action_write(SUC, SUC, from_older_claim=True) is ActionWrite.KEEP
