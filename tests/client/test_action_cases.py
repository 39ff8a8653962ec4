"""ctx.run_action against a real server, one test per case of the table both runtimes run.

The table is tests/shared/action_cases.json; the Node runtime's twin is
clients/node/test/action-cases.test.js (run by tests/node/test_node_action_cases.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from inboxd_client import ActionUnresolved, AsyncInboxClient, EventContext, Reconciled, UncertainOutcome
from inboxd_client.v1 import inbox_pb2, types_pb2
from tests.client.helpers import accept
from tests.shared.action_cases import ActionCase, load_action_cases

ACTION = "charge:v1"
CASES = load_action_cases()
STATES = {
    "INTENDED": types_pb2.ACTION_STATE_INTENDED,
    "SUCCEEDED": types_pb2.ACTION_STATE_SUCCEEDED,
    "FAILED": types_pb2.ACTION_STATE_FAILED,
    "UNKNOWN": types_pb2.ACTION_STATE_UNKNOWN,
}
VERDICTS: dict[str, Reconciled | None] = {
    "succeeded": Reconciled(succeeded=True),
    "failed": Reconciled(succeeded=False),
    "unknown": None,
}


def bare(state: types_pb2.ActionState) -> str:
    return types_pb2.ActionState.Name(state).removeprefix("ACTION_STATE_")


async def claim_one(client: AsyncInboxClient, ns: str) -> inbox_pb2.ClaimedEvent:
    answer = await client.claim(namespaces=[ns], wait=2, lease=30)
    assert len(answer.events) == 1, f"expected one event in {ns}"
    return answer.events[0]


async def event_with(
    client: AsyncInboxClient, ns: str, case: ActionCase
) -> tuple[inbox_pb2.ClaimedEvent, types_pb2.ActionRecord | None]:
    """The event as the runtime gets it, with the case's prior states recorded by an earlier claim or its own."""
    await accept(client, ns, "e")
    first = await claim_one(client, ns)
    last = None
    for state in case.prior:
        answer = await client.record_action_outcome(first, ACTION, STATES[state])
        last = answer.action
    if case.by != "earlier_claim":
        if last is not None:
            first.actions.append(last)  # as if this claim's own earlier call had recorded it
        return first, last
    await client.fail(first, "an earlier attempt", retry_after=0)
    event = await claim_one(client, ns)
    assert [bare(a.state) for a in event.actions] == [case.prior[-1]]
    return event, event.actions[0]


async def final_state(client: AsyncInboxClient, event: inbox_pb2.ClaimedEvent) -> str:
    """The action's state on the server: the next claim's view of it."""
    await client.fail(event, "case done", retry_after=0)
    again = await claim_one(client, event.namespace)
    await client.complete(again)
    [record] = [a for a in again.actions if a.action == ACTION]
    return bare(record.state)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
async def test_run_action_does_what_the_shared_table_says(
    case: ActionCase, client: AsyncInboxClient, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    event, prior = await event_with(client, ns, case)
    recorded: list[str] = []
    record_action_outcome = client.record_action_outcome

    async def noting(fenced: Any, action: str, state: types_pb2.ActionState, **kwargs: Any) -> Any:
        recorded.append(bare(state))
        return await record_action_outcome(fenced, action, state, **kwargs)

    # The runtime's client notes each outcome it records; every call still goes to the server.
    monkeypatch.setattr(client, "record_action_outcome", noting)
    keys: list[str] = []
    performed = 0
    body_error: Exception = RuntimeError("declined") if case.perform == "fails_certainly" else UncertainOutcome("reset")

    async def perform(key: str) -> str:
        nonlocal performed
        performed += 1
        keys.append(key)
        if case.perform != "returns":
            raise body_error
        return "ch_1"

    reconciled = 0

    async def reconcile(key: str) -> Reconciled | None:
        nonlocal reconciled
        reconciled += 1
        keys.append(key)
        return VERDICTS[str(case.reconcile)]

    ctx = EventContext(client, event)
    raised: BaseException | None = None
    try:
        await ctx.run_action(ACTION, perform, reconcile=reconcile if case.reconcile is not None else None)
    except Exception as exc:  # every case says which error, if any, must come out
        raised = exc
    monkeypatch.undo()
    expect = case.expect
    if expect.raises is None:
        assert raised is None
    elif expect.raises == "unresolved":
        assert isinstance(raised, ActionUnresolved), repr(raised)
        assert expect.says is not None and expect.says in str(raised), str(raised)
        # "pass reconcile=" is advice only for a caller who gave none.
        assert ("pass reconcile" in str(raised)) is (case.reconcile is None), str(raised)
    else:
        assert raised is body_error
    assert performed == expect.performed, "times the body ran"
    assert reconciled == expect.reconciled, "times reconcile was asked"
    assert recorded == expect.recorded, "the outcomes recorded, in order"
    if prior is not None:
        assert set(keys) <= {prior.idempotency_key}, "one idempotency key throughout"
    assert await final_state(client, event) == expect.final, "the state on the server"
