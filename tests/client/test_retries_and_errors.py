"""Which calls gRPC retries on UNAVAILABLE, how each status surfaces, and what metadata goes out.

Against FakeInbox, which fails exactly the calls it is told to, for both the
async and the sync client (sync calls run in a thread: the fake shares the test's loop).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import pytest

from inboxd_client import (
    AsyncInboxClient,
    ClaimSuperseded,
    DeadlineExceeded,
    InboxClient,
    InboxError,
    Unavailable,
    accept_request,
)
from inboxd_client.errors import ERROR_BY_CODE
from inboxd_client.rpcs import ALL_RPCS, Rpc
from inboxd_client.v1 import admin_pb2, inbox_pb2, types_pb2
from tests.client.conftest import FAST_RETRY
from tests.client.fake_inbox import SERVICES, FakeInbox

CLAIMED = inbox_pb2.ClaimedEvent(namespace="ns", event_key="k", claim_token="t")

# RPC name -> (client method, args, kwargs): one call of each RPC through the public API.
CALLS: dict[str, tuple[str, tuple[Any, ...], dict[str, Any]]] = {
    "Accept": ("accept", ("ns", "k", "t", {"a": 1}), {}),
    "AcceptBatch": ("accept_batch", ([accept_request("ns", "k", "t", {})],), {}),
    "Claim": ("claim", (), {"namespaces": ["ns"]}),
    "RenewLease": ("renew_lease", (CLAIMED,), {"lease": 5}),
    "Complete": ("complete", (CLAIMED,), {}),
    # No items: the fake answers no results, which is exactly right for none.
    "CompleteBatch": ("complete_many", ([],), {}),
    "Fail": ("fail", (CLAIMED, "boom"), {}),
    "Release": ("release", (CLAIMED,), {}),
    "RecordActionOutcome": ("record_action_outcome", (CLAIMED, "send", types_pb2.ACTION_STATE_INTENDED), {}),
    "GetEvent": ("get_event", ("ns", "k"), {}),
    "ListEvents": ("list_events", ("ns",), {}),
    "Stats": ("stats", ("ns",), {}),
    "Replay": ("replay", ("ns", "k", "operator says so"), {}),
    "SettleAction": ("settle_action", (admin_pb2.SettleActionRequest(namespace="ns", event_key="k"),), {}),
    "EndClaim": ("end_claim", (admin_pb2.EndClaimRequest(namespace="ns", event_key="k"),), {}),
    "Discard": ("discard", (admin_pb2.DiscardRequest(namespace="ns", event_key="k"),), {}),
    "SetFlowControl": ("set_flow_control", (admin_pb2.SetFlowControlRequest(pattern="ns", reason="r"),), {}),
    "GetFlowControl": ("get_flow_control", ("ns",), {}),
    "ListFlowControls": ("list_flow_controls", (), {}),
    "StartBulkOperation": ("start_bulk_operation", (admin_pb2.StartBulkOperationRequest(reason="r"),), {}),
    "GetBulkOperation": ("get_bulk_operation", ("op",), {}),
    "ListBulkOperations": ("list_bulk_operations", (), {}),
    "CancelBulkOperation": ("cancel_bulk_operation", ("op", "r"), {}),
    "CreateSubscription": ("create_subscription", (admin_pb2.CreateSubscriptionRequest(name="s"),), {}),
    "GetSubscription": ("get_subscription", ("s",), {}),
    "ListSubscriptions": ("list_subscriptions", (), {}),
    "DeleteSubscription": ("delete_subscription", ("s", "r"), {}),
    "CreateDestination": ("create_destination", (admin_pb2.CreateDestinationRequest(name="d", reason="r"),), {}),
    "GetDestination": ("get_destination", ("d",), {}),
    "ListDestinations": ("list_destinations", (), {}),
    "DeleteDestination": ("delete_destination", ("d", "r"), {}),
    "ResumeDestination": ("resume_destination", ("d", "r"), {}),
}

Caller = Callable[[str], Any]


@pytest.fixture
async def fake() -> AsyncIterator[FakeInbox]:
    inbox = await FakeInbox().start()
    yield inbox
    await inbox.stop()


@pytest.fixture(params=["async", "sync"])
async def call(request: pytest.FixtureRequest, fake: FakeInbox) -> AsyncIterator[Callable[..., Any]]:
    """Calls one RPC by name through the async or the sync client, with a token."""
    if request.param == "async":
        async with AsyncInboxClient(fake.target, token="s3cret", retry=FAST_RETRY) as aclient:

            async def call_async(rpc_name: str) -> Any:
                method, args, kwargs = CALLS[rpc_name]
                return await getattr(aclient, method)(*args, **kwargs)

            yield call_async
        return
    sclient = InboxClient(fake.target, token="s3cret", retry=FAST_RETRY)

    async def call_sync(rpc_name: str) -> Any:
        method, args, kwargs = CALLS[rpc_name]
        return await asyncio.to_thread(getattr(sclient, method), *args, **kwargs)

    yield call_sync
    sclient.close()


def test_the_rpc_table_covers_every_rpc_of_the_contract() -> None:
    # Streaming RPCs are not calls to retry: AcceptStream resends its own (inboxd_client.accept_stream).
    contract = {f"/{s.full_name}/{m.name}" for s in SERVICES for m in s.methods if not m.client_streaming}
    assert {rpc.path for rpc in ALL_RPCS} == contract
    assert set(CALLS) == {rpc.name for rpc in ALL_RPCS}


@pytest.mark.parametrize("rpc", ALL_RPCS, ids=lambda rpc: rpc.name)
async def test_unavailable_is_retried_only_for_calls_that_are_safe_to_repeat(
    fake: FakeInbox, call: Callable[..., Any], rpc: Rpc[Any]
) -> None:
    fake.fail_next(rpc.name, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAVAILABLE)
    if rpc.retry_safe:
        await call(rpc.name)
        assert fake.calls[rpc.name] == 3
    else:
        with pytest.raises(Unavailable):
            await call(rpc.name)
        assert fake.calls[rpc.name] == 1


async def test_a_deadline_exceeded_is_not_retried_even_for_a_safe_call(
    fake: FakeInbox, call: Callable[..., Any]
) -> None:
    fake.fail_next("Accept", grpc.StatusCode.DEADLINE_EXCEEDED)
    with pytest.raises(DeadlineExceeded):
        await call("Accept")
    assert fake.calls["Accept"] == 1


@pytest.mark.parametrize("code", list(ERROR_BY_CODE), ids=lambda code: code.name)
async def test_each_status_code_raises_its_own_exception(
    fake: FakeInbox, call: Callable[..., Any], code: grpc.StatusCode
) -> None:
    fake.fail_next("Fail", code)  # never retried, so every code surfaces
    with pytest.raises(InboxError) as caught:
        await call("Fail")
    assert type(caught.value) is ERROR_BY_CODE[code]
    assert caught.value.code == code
    assert "scripted failure of Fail" in caught.value.details


async def test_aborted_is_claim_superseded(fake: FakeInbox, call: Callable[..., Any]) -> None:
    fake.fail_next("Release", grpc.StatusCode.ABORTED)
    with pytest.raises(ClaimSuperseded):
        await call("Release")


async def test_the_token_goes_out_as_a_bearer_authorization_header(fake: FakeInbox, call: Callable[..., Any]) -> None:
    await call("Stats")
    assert fake.metadata[-1]["authorization"] == "Bearer s3cret"


async def test_without_a_token_no_authorization_header_is_sent(fake: FakeInbox) -> None:
    async with AsyncInboxClient(fake.target) as client:
        await client.stats()
    assert "authorization" not in fake.metadata[-1]
