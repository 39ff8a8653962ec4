"""Every transition that makes an event claimable wakes a Claim waiting for it.

The inboxes here poll on behalf of their waiters once an hour (the fallback
poll), so a waiting Claim that gets its event before its wait ends was woken
by the transition itself. Each waiter is seen to have looked and found
nothing before the transition runs, so its first look cannot find the event.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest

from inboxd.background.rescuer import run_rescue_pass
from inboxd.config.settings import Settings
from inboxd.domain.vocabulary import (
    ClaimBatch,
    ClaimedEvent,
    ClaimRequest,
    Completion,
    Disposition,
    EventKey,
    Fence,
    Namespace,
    NewEvent,
    Wanted,
)
from inboxd.observability.transition_observer import InboxObserver
from inboxd.serving.server import RunningServer
from inboxd.store.database import Database
from inboxd.store.wakeups import due_kinds
from inboxd.usecases.inbox import Inbox
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import NO_FALLBACK
from tests.harness import ServerProcess, eventually

LONG_WAIT = timedelta(seconds=60)
# Well under LONG_WAIT: a Claim still waiting by then was not woken.
ANSWER_WITHIN = 15.0
TYPE = "test.event"


@dataclass
class Looks(InboxObserver):
    """Counts the claim statements an inbox runs, so a test knows its waiter has looked."""

    count: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def claimed(self, worker_id: str, batch: ClaimBatch) -> None:
        self.count += 1
        self.changed.set()


@dataclass
class Rig:
    inbox: Inbox
    looks: Looks

    async def waiting(self, ns: str) -> asyncio.Task[ClaimBatch]:
        """A Claim waiting for `ns` that has looked once and found nothing."""
        before = self.looks.count
        request = ClaimRequest((ns,), (), 1, timedelta(seconds=30), LONG_WAIT, "waiter")
        task = asyncio.create_task(self.inbox.claim(request))
        await eventually(lambda: self.looks.count > before or task.done(), "the waiting claim to look")
        assert not task.done(), f"the claim did not wait: {task.result()}"
        return task

    async def claim(self, ns: str, lease: timedelta = timedelta(seconds=30)) -> list[ClaimedEvent]:
        batch = await self.inbox.claim(ClaimRequest((ns,), (), 10, lease, timedelta(0), "worker"))
        return list(batch.events)


async def answered(task: Awaitable[ClaimBatch]) -> list[str]:
    batch = await asyncio.wait_for(task, ANSWER_WITHIN)
    return [e.event_key for e in batch.events]


def event(ns: str, key: str, **fields: Any) -> NewEvent:
    return NewEvent(Namespace(ns), EventKey(key), TYPE, b"{}", **fields)


def fence(claimed: ClaimedEvent) -> Fence:
    return Fence(claimed.namespace, claimed.event_key, claimed.claim_token)


@pytest.fixture
async def rig(db: Database, settings: Settings) -> AsyncIterator[Rig]:
    looks = Looks()
    inbox = Inbox(db, replace(settings, max_attempts=2), observer=looks, fallback_poll_seconds=NO_FALLBACK)
    yield Rig(inbox, looks)


async def test_a_fail_with_its_retry_due_now_wakes_a_waiting_claim(rig: Rig, ns: str) -> None:
    await rig.inbox.accept([event(ns, "k")])
    [claimed] = await rig.claim(ns)
    waiter = await rig.waiting(ns)
    await rig.inbox.fail(fence(claimed), "boom", permanent=False, retry_after=timedelta(0))
    assert await answered(waiter) == ["k"]


async def test_a_fail_with_a_later_retry_wakes_a_waiting_claim_when_the_retry_comes_due(rig: Rig, ns: str) -> None:
    await rig.inbox.accept([event(ns, "k")])
    [claimed] = await rig.claim(ns)
    waiter = await rig.waiting(ns)
    await rig.inbox.fail(fence(claimed), "boom", permanent=False, retry_after=timedelta(seconds=0.3))
    assert await answered(waiter) == ["k"]


async def test_a_delayed_accept_wakes_a_waiting_claim_when_it_comes_due(rig: Rig, ns: str) -> None:
    waiter = await rig.waiting(ns)
    await rig.inbox.accept([event(ns, "later", available_at=datetime.now(UTC) + timedelta(seconds=0.3))])
    assert await answered(waiter) == ["later"]


async def test_completing_an_ordering_keys_holder_wakes_a_claim_waiting_for_the_keys_next_event(
    rig: Rig, ns: str
) -> None:
    await rig.inbox.accept([event(ns, "first", ordering_key="order-1"), event(ns, "second", ordering_key="order-1")])
    [holder] = await rig.claim(ns)
    assert holder.event_key == "first"
    waiter = await rig.waiting(ns)
    await rig.inbox.complete(fence(holder), Disposition.APPLIED, "")
    assert await answered(waiter) == ["second"]


async def test_a_batch_completing_an_ordering_keys_holder_wakes_a_claim_waiting_for_the_keys_next_event(
    rig: Rig, ns: str
) -> None:
    await rig.inbox.accept([event(ns, "first", ordering_key="order-1"), event(ns, "second", ordering_key="order-1")])
    [holder] = await rig.claim(ns)
    waiter = await rig.waiting(ns)
    assert await rig.inbox.complete_many([Completion(fence(holder), Disposition.APPLIED, "")]) == [None]
    assert await answered(waiter) == ["second"]


@pytest.mark.parametrize("permanent", [True, False], ids=["permanently", "out-of-attempts"])
async def test_dead_lettering_an_ordering_keys_holder_wakes_a_claim_waiting_for_the_keys_next_event(
    rig: Rig, ns: str, permanent: bool
) -> None:
    await rig.inbox.accept([event(ns, "first", ordering_key="order-1"), event(ns, "second", ordering_key="order-1")])
    [holder] = await rig.claim(ns)
    if not permanent:  # max_attempts is 2: the second attempt's failure dead-letters
        await rig.inbox.fail(fence(holder), "boom", permanent=False, retry_after=timedelta(0))
        [holder] = await rig.claim(ns)
        assert (holder.event_key, holder.attempt) == ("first", 2)
    waiter = await rig.waiting(ns)
    await rig.inbox.fail(fence(holder), "boom", permanent=permanent, retry_after=timedelta(0))
    assert await answered(waiter) == ["second"]


async def test_the_rescuer_dead_lettering_an_ordering_keys_holder_wakes_a_claim_waiting_for_the_keys_next_event(
    rig: Rig, ns: str
) -> None:
    await rig.inbox.accept([event(ns, "first", ordering_key="order-1"), event(ns, "second", ordering_key="order-1")])
    [holder] = await rig.claim(ns)
    await rig.inbox.fail(fence(holder), "boom", permanent=False, retry_after=timedelta(0))
    [holder] = await rig.claim(ns, lease=timedelta(seconds=1))
    waiter = await rig.waiting(ns)
    # Its lease ends in a second: the rescuer's clock is moved past it and its grace, the claim's is not.
    past_grace = datetime.now(UTC) + rig.inbox.settings.rescue_grace + timedelta(minutes=1)
    rescued = await run_rescue_pass(rig.inbox, now=past_grace, namespace=ns)
    assert rescued is not None and len(rescued) == 1
    assert await answered(waiter) == ["second"]


async def test_the_poller_counts_no_event_waiting_behind_its_keys_holder(rig: Rig, db: Database, ns: str) -> None:
    await rig.inbox.accept([event(ns, "first", ordering_key="order-1"), event(ns, "second", ordering_key="order-1")])
    [holder] = await rig.claim(ns)
    await rig.inbox.release(fence(holder))
    await rig.claim(ns)  # the holder again: "second" waits behind it
    wanted = Wanted(frozenset({(ns, "")}), frozenset(), frozenset())
    assert await db.run(lambda conn: due_kinds(conn, wanted), transaction=False) == []
    anywhere = Wanted(frozenset(), frozenset(), frozenset({TYPE}))
    found = await db.run(lambda conn: due_kinds(conn, anywhere), transaction=False)
    assert (ns, TYPE) not in {(namespace, event_type) for namespace, event_type, _ in found}


# -- across server processes --


async def test_completing_a_keys_holder_on_another_replica_wakes_a_claim_waiting_here_for_the_keys_next_event(
    quiet_server: RunningServer, migrated_url: str, ns: str
) -> None:
    inbox = quiet_server.inbox
    looks = Looks()
    inbox.observer = looks
    other = await asyncio.to_thread(ServerProcess(database_url=migrated_url).start)
    try:
        async with grpc.aio.insecure_channel(other.target) as chan:
            afar = InboxServiceStub(chan)
            for key in ("first", "second"):
                request = inbox_pb2.AcceptRequest(
                    namespace=ns, event_key=key, event_type=TYPE, payload=b"{}", ordering_key="order-1"
                )
                await afar.Accept(request)
            [holder] = (await afar.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], max_events=10))).events
            assert holder.event_key == "first"
            await eventually(lambda: inbox.signals is not None and inbox.signals.listening, "this replica to listen")
            waiter = await Rig(inbox, looks).waiting(ns)
            await afar.Complete(
                inbox_pb2.CompleteRequest(namespace=ns, event_key="first", claim_token=holder.claim_token)
            )
            assert await answered(waiter) == ["second"]
    finally:
        other.kill()
