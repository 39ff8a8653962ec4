"""What a Worker does when Claim itself fails: poll again after a pause, or give up on a mistake."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest

from inboxd_client import AsyncInboxClient, EventContext, Unauthenticated, Worker
from tests.client.fake_inbox import FakeInbox
from tests.client.helpers import eventually


async def never_called(ctx: EventContext) -> None:
    raise AssertionError("the fake hands out no events")


@pytest.fixture
async def fake() -> AsyncIterator[FakeInbox]:
    inbox = await FakeInbox().start()
    yield inbox
    await inbox.stop()


async def test_the_worker_polls_again_after_claim_is_unavailable(fake: FakeInbox) -> None:
    fake.fail_next("Claim", grpc.StatusCode.UNAVAILABLE)
    async with AsyncInboxClient(fake.target) as client:
        worker = Worker(client, never_called, wait=0)
        task = asyncio.create_task(worker.run(handle_signals=False))
        await eventually(lambda: fake.calls["Claim"] >= 2, "a second Claim after the failed one")
        worker.stop()
        await asyncio.wait_for(task, 10)


async def test_the_worker_stops_and_raises_when_claim_is_refused_for_its_credentials(fake: FakeInbox) -> None:
    fake.fail_next("Claim", grpc.StatusCode.UNAUTHENTICATED)
    async with AsyncInboxClient(fake.target) as client:
        worker = Worker(client, never_called, wait=0)
        with pytest.raises(Unauthenticated):
            await asyncio.wait_for(worker.run(handle_signals=False), 10)
    assert fake.calls["Claim"] == 1
