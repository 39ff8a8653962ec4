"""ctx.run_action and ctx.action against a real server: one key per action, honest outcomes, reconciliation.

Each test drives claims by hand (claim, act, then Fail with no delay or
Release, then claim again), so "a later claim" is exact, with no worker timing.
"""

from __future__ import annotations

import asyncio

import pytest

from inboxd_client import (
    ActionState,
    ActionUnresolved,
    AsyncInboxClient,
    ClaimSuperseded,
    EventContext,
    Reconciled,
    SyncEventContext,
    UncertainOutcome,
)
from tests.client.helpers import accept

SEND = "send-welcome:v1"


async def claim_ctx(client: AsyncInboxClient, ns: str) -> EventContext:
    answer = await client.claim(namespaces=[ns], wait=2)
    assert len(answer.events) == 1, f"expected one event, got {len(answer.events)}"
    return EventContext(client, answer.events[0])


async def next_claim(client: AsyncInboxClient, ctx: EventContext) -> EventContext:
    """Ends this claim with a retryable failure due at once, and claims the event again."""
    await client.fail(ctx.event, "try again", retry_after=0)
    return await claim_ctx(client, ctx.namespace)


class Downstream:
    """A stand-in for a remote API: counts calls and answers or raises as told."""

    def __init__(self, raises: BaseException | None = None) -> None:
        self.keys: list[str] = []
        self.raises = raises

    async def send(self, key: str) -> str:
        self.keys.append(key)
        if self.raises is not None:
            raise self.raises
        return f"msg-{len(self.keys)}"


async def test_run_action_passes_one_key_downstream_and_records_success_with_the_external_ref(
    client: AsyncInboxClient, ns: str
) -> None:
    await accept(client, ns, "k")
    ctx = await claim_ctx(client, ns)
    api = Downstream()
    result = await ctx.run_action(SEND, api.send)
    assert result.ran and result.external_ref == "msg-1"
    assert api.keys == [result.idempotency_key]
    record = (await next_claim(client, ctx)).actions[SEND]
    assert (record.state, record.idempotency_key, record.external_ref) == (
        ActionState.ACTION_STATE_SUCCEEDED,
        result.idempotency_key,
        "msg-1",
    )
    assert record.fencing_token == ctx.fencing_token


async def test_an_action_that_succeeded_on_an_earlier_claim_is_not_done_again(
    client: AsyncInboxClient, ns: str
) -> None:
    await accept(client, ns, "k")
    ctx = await claim_ctx(client, ns)
    api = Downstream()
    await ctx.run_action(SEND, api.send)
    again = await (await next_claim(client, ctx)).run_action(SEND, api.send)
    assert len(api.keys) == 1
    assert (again.ran, again.external_ref) == (False, "msg-1")


async def test_a_failed_action_is_recorded_failed_and_done_again_with_the_same_key(
    client: AsyncInboxClient, ns: str
) -> None:
    await accept(client, ns, "k")
    ctx = await claim_ctx(client, ns)
    api = Downstream(raises=ValueError("mailbox unknown"))
    with pytest.raises(ValueError, match="mailbox unknown"):
        await ctx.run_action(SEND, api.send)
    ctx = await next_claim(client, ctx)
    record = ctx.actions[SEND]
    assert record.state == ActionState.ACTION_STATE_FAILED
    assert "ValueError: mailbox unknown" in record.detail
    api.raises = None
    await ctx.run_action(SEND, api.send)
    assert api.keys == [record.idempotency_key, record.idempotency_key]


class GatewayTimeout(Exception):
    """A user's own error class that means 'maybe it happened'."""


@pytest.mark.parametrize(
    "error",
    [TimeoutError("read timed out"), ConnectionResetError("reset by peer"), UncertainOutcome("502"), GatewayTimeout()],
    ids=["timeout", "connection-reset", "uncertain-outcome", "user-marked"],
)
async def test_an_error_after_which_the_remote_side_may_have_acted_is_recorded_unknown(
    client: AsyncInboxClient, ns: str, error: Exception
) -> None:
    await accept(client, ns, "k")
    ctx = await claim_ctx(client, ns)
    with pytest.raises(type(error)):
        await ctx.run_action(SEND, Downstream(raises=error).send, uncertain=(GatewayTimeout,))
    assert (await next_claim(client, ctx)).actions[SEND].state == ActionState.ACTION_STATE_UNKNOWN


async def test_an_unknown_action_found_done_by_reconcile_is_recorded_succeeded_and_not_repeated(
    client: AsyncInboxClient, ns: str
) -> None:
    await accept(client, ns, "k")
    ctx = await claim_ctx(client, ns)
    api = Downstream(raises=TimeoutError())
    with pytest.raises(TimeoutError):
        await ctx.run_action(SEND, api.send)
    looked_up: list[str] = []

    async def reconcile(key: str) -> Reconciled:
        looked_up.append(key)
        return Reconciled(succeeded=True, external_ref="msg-from-lookup")

    ctx = await next_claim(client, ctx)
    result = await ctx.run_action(SEND, api.send, reconcile=reconcile)
    assert looked_up == api.keys  # one call, one lookup, one key
    assert (result.ran, result.external_ref) == (False, "msg-from-lookup")
    record = (await next_claim(client, ctx)).actions[SEND]
    assert (record.state, record.external_ref) == (ActionState.ACTION_STATE_SUCCEEDED, "msg-from-lookup")


async def test_an_unknown_action_found_not_done_by_reconcile_is_done_again_with_the_same_key(
    client: AsyncInboxClient, ns: str
) -> None:
    await accept(client, ns, "k")
    ctx = await claim_ctx(client, ns)
    api = Downstream(raises=ConnectionError())
    with pytest.raises(ConnectionError):
        await ctx.run_action(SEND, api.send)

    async def reconcile(key: str) -> Reconciled:
        return Reconciled(succeeded=False, detail="no such send")

    api.raises = None
    ctx = await next_claim(client, ctx)
    result = await ctx.run_action(SEND, api.send, reconcile=reconcile)
    assert result.ran and api.keys == [result.idempotency_key] * 2
    assert (await next_claim(client, ctx)).actions[SEND].state == ActionState.ACTION_STATE_SUCCEEDED


@pytest.mark.parametrize("hook", ["no reconcile hook", "a hook that cannot tell"])
async def test_an_unknown_action_with_no_verdict_is_not_done_again(
    client: AsyncInboxClient, ns: str, hook: str
) -> None:
    await accept(client, ns, "k")
    ctx = await claim_ctx(client, ns)
    api = Downstream(raises=TimeoutError())
    with pytest.raises(TimeoutError):
        await ctx.run_action(SEND, api.send)

    async def cannot_tell(key: str) -> Reconciled | None:
        return None

    ctx = await next_claim(client, ctx)
    with pytest.raises(ActionUnresolved):
        await ctx.run_action(SEND, api.send, reconcile=None if hook == "no reconcile hook" else cannot_tell)
    assert len(api.keys) == 1


async def test_an_action_left_intended_by_a_claim_that_died_is_reconciled_before_acting(
    client: AsyncInboxClient, ns: str
) -> None:
    await accept(client, ns, "k")
    dead = await claim_ctx(client, ns)
    intended = await client.record_action_outcome(dead.event, SEND, ActionState.ACTION_STATE_INTENDED)
    await client.release(dead.event)  # the worker vanished between INTENDED and any outcome
    looked_up: list[str] = []

    async def reconcile(key: str) -> Reconciled:
        looked_up.append(key)
        return Reconciled(succeeded=True)

    ctx = await claim_ctx(client, ns)
    assert ctx.actions[SEND].state == ActionState.ACTION_STATE_INTENDED
    api = Downstream()
    result = await ctx.run_action(SEND, api.send, reconcile=reconcile)
    assert (result.ran, api.keys, looked_up) == (False, [], [intended.action.idempotency_key])


async def test_a_cancellation_mid_action_is_recorded_unknown(client: AsyncInboxClient, ns: str) -> None:
    await accept(client, ns, "k")
    ctx = await claim_ctx(client, ns)
    entered = asyncio.Event()

    async def hang(key: str) -> str:
        entered.set()
        await asyncio.Event().wait()
        return "never"

    task = asyncio.create_task(ctx.run_action(SEND, hang))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await next_claim(client, ctx)).actions[SEND].state == ActionState.ACTION_STATE_UNKNOWN


async def test_a_stale_claim_cannot_start_an_action(client: AsyncInboxClient, ns: str) -> None:
    await accept(client, ns, "k")
    stale = await claim_ctx(client, ns)
    await client.release(stale.event)
    await claim_ctx(client, ns)
    api = Downstream()
    with pytest.raises(ClaimSuperseded):
        await stale.run_action(SEND, api.send)
    assert api.keys == []


async def test_the_action_context_manager_exposes_done_and_refuses_the_key_unless_done_was_checked(
    client: AsyncInboxClient, ns: str
) -> None:
    await accept(client, ns, "k")
    ctx = await claim_ctx(client, ns)
    async with ctx.action(SEND) as act:
        assert not act.done
        act.external_ref = "msg-1"
        key = act.idempotency_key
    ctx = await next_claim(client, ctx)
    async with ctx.action(SEND) as act:
        with pytest.raises(RuntimeError, match=r"check `act\.done`"):
            _ = act.idempotency_key
        assert act.done
        assert (act.idempotency_key, act.external_ref) == (key, "msg-1")


async def test_a_sync_handlers_run_action_records_outcomes_from_its_thread(client: AsyncInboxClient, ns: str) -> None:
    await accept(client, ns, "k")
    ctx = await claim_ctx(client, ns)
    sync_ctx = SyncEventContext(ctx, asyncio.get_running_loop())
    keys: list[str] = []

    def send(key: str) -> str:
        keys.append(key)
        return "msg-sync"

    result = await asyncio.to_thread(sync_ctx.run_action, SEND, send)
    assert (result.ran, keys) == (True, [result.idempotency_key])
    again = await next_claim(client, ctx)
    record = again.actions[SEND]
    assert (record.state, record.external_ref) == (ActionState.ACTION_STATE_SUCCEEDED, "msg-sync")
    skipped = await asyncio.to_thread(SyncEventContext(again, asyncio.get_running_loop()).run_action, SEND, send)
    assert (skipped.ran, len(keys)) == (False, 1)
