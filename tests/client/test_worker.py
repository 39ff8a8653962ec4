"""Worker against a real server: how a handler's end becomes the claim's end, and renewals.

Tests that need leases to expire or backoffs to pass use the clocked server
and move its clock; the renewal test uses a short real lease.
"""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

import pytest

from inboxd.store.database import Database
from inboxd_client import (
    AsyncInboxClient,
    ClaimSuperseded,
    EventContext,
    Ignore,
    PermanentError,
    RetryLater,
    SyncEventContext,
    Worker,
)
from inboxd_client.v1 import inbox_pb2
from tests.client.helpers import accept, eventually, read_event, running, state_of
from tests.conftest import FakeClock

# Each test runs on the Work stream and on unary Claims (tests/client/conftest.py).
pytestmark = pytest.mark.usefixtures("worker_path")


async def test_a_returning_handler_completes_its_event_as_applied(
    client: AsyncInboxClient, db: Database, ns: str
) -> None:
    seen: list[object] = []

    async def handle(ctx: EventContext) -> None:
        seen.append(ctx.json())

    await accept(client, ns, "k1", "k2")
    worker = Worker(client, handle, namespaces=[ns], wait=1.0)
    async with running(worker):
        await eventually(lambda: worker.stats.completed == 2, "both events completed")
    assert sorted(seen, key=str) == [{"id": "k1"}, {"id": "k2"}]
    row = await read_event(db, ns, "k1")
    assert (row["state"], row["disposition"], row["attempt"]) == ("completed", "applied", 1)


async def test_a_sync_handler_runs_in_its_own_thread_and_completes(
    client: AsyncInboxClient, db: Database, ns: str
) -> None:
    threads: list[str] = []

    def handle(ctx: SyncEventContext) -> None:
        threads.append(threading.current_thread().name)

    await accept(client, ns, "k")
    worker = Worker(client, handle, namespaces=[ns], wait=1.0)
    async with running(worker):
        await eventually(lambda: worker.stats.completed == 1, "the event completed")
    assert threads and threads[0] != threading.main_thread().name
    assert await state_of(db, ns, "k") == "completed"


@pytest.mark.parametrize("how", ["returns Ignore", "calls ctx.ignore"])
async def test_an_ignoring_handler_completes_the_event_as_ignored_with_its_reason(
    client: AsyncInboxClient, db: Database, ns: str, how: str
) -> None:
    async def handle(ctx: EventContext) -> Ignore | None:
        if how == "returns Ignore":
            return Ignore("not a customer of ours")
        ctx.ignore("not a customer of ours")
        return None

    await accept(client, ns, "k")
    worker = Worker(client, handle, namespaces=[ns], wait=1.0)
    async with running(worker):
        await eventually(lambda: worker.stats.ignored == 1, "the event completed as ignored")
    row = await read_event(db, ns, "k")
    assert (row["state"], row["disposition"], row["disposition_reason"]) == (
        "completed",
        "ignored",
        "not a customer of ours",
    )


async def test_a_raising_handler_is_retried_then_dead_lettered(
    clocked_client: AsyncInboxClient, db: Database, ns: str, clock: FakeClock
) -> None:
    attempts: list[int] = []

    async def handle(ctx: EventContext) -> None:
        attempts.append(ctx.attempt)
        raise ValueError(f"boom on attempt {ctx.attempt}")

    await accept(clocked_client, ns, "k")
    worker = Worker(clocked_client, handle, namespaces=[ns], wait=0.5)

    async def dead_lettered() -> bool:
        clock.advance(5)  # past any backoff of the clocked server (base 1 s, factor 2)
        return await state_of(db, ns, "k") == "dead_lettered"

    async with running(worker):
        await eventually(dead_lettered, "the event dead-lettered", every=0.1)
    assert attempts == [1, 2, 3]  # the clocked server allows 3 attempts
    assert (worker.stats.failed, worker.stats.dead_lettered) == (2, 1)
    assert "ValueError: boom on attempt 3" in (await read_event(db, ns, "k"))["last_error"]


async def test_a_permanent_error_dead_letters_at_once(client: AsyncInboxClient, db: Database, ns: str) -> None:
    async def handle(ctx: EventContext) -> None:
        raise PermanentError("the payload names no account")

    await accept(client, ns, "k")
    worker = Worker(client, handle, namespaces=[ns], wait=1.0)
    async with running(worker):
        await eventually(lambda: worker.stats.dead_lettered == 1, "the event dead-lettered")
    row = await read_event(db, ns, "k")
    assert (row["state"], row["attempt"]) == ("dead_lettered", 1)
    assert "the payload names no account" in row["last_error"]


async def test_retry_later_schedules_the_next_attempt_after_its_delay(
    clocked_client: AsyncInboxClient, db: Database, ns: str, clock: FakeClock
) -> None:
    async def handle(ctx: EventContext) -> None:
        raise RetryLater("rate limited", retry_after=timedelta(minutes=7))

    await accept(clocked_client, ns, "k")
    worker = Worker(clocked_client, handle, namespaces=[ns], wait=0.5)
    async with running(worker):
        await eventually(lambda: worker.stats.failed == 1, "the failure reported")
    row = await read_event(db, ns, "k")
    assert row["state"] == "pending"
    assert row["available_at"] == clock.now + timedelta(minutes=7)


async def test_a_slow_handler_keeps_its_lease_through_renewals(client: AsyncInboxClient, db: Database, ns: str) -> None:
    """The handler outlives its 2.4 s lease; a competitor polling all along never gets the event."""
    finish = asyncio.Event()

    async def handle(ctx: EventContext) -> None:
        await finish.wait()

    await accept(client, ns, "k")
    worker = Worker(client, handle, namespaces=[ns], lease=2.4, wait=1.0)
    stolen: list[str] = []

    async def compete() -> bool:
        answer = await client.claim(namespaces=[ns], wait=0)
        stolen.extend(e.event_key for e in answer.events)
        return worker.stats.renewals >= 4  # renewed every 0.8 s: 3.2 s in, past the first lease

    async with running(worker):
        await eventually(lambda: worker.stats.claimed == 1, "the worker claimed the event")
        await eventually(compete, "four renewals", every=0.1)
        finish.set()
        await eventually(lambda: worker.stats.completed == 1, "the event completed")
    assert stolen == []
    row = await read_event(db, ns, "k")
    assert (row["state"], row["attempt"]) == ("completed", 1)


async def test_a_handler_whose_lease_was_taken_over_is_cancelled_and_its_complete_is_refused(
    clocked_client: AsyncInboxClient, db: Database, ns: str, clock: FakeClock
) -> None:
    contexts: list[EventContext] = []
    cancelled = asyncio.Event()

    async def handle(ctx: EventContext) -> None:
        contexts.append(ctx)
        try:
            await asyncio.Event().wait()  # works until stopped
        except asyncio.CancelledError:
            cancelled.set()
            raise

    await accept(clocked_client, ns, "k")
    # One slot: a worker with free slots keeps claiming, and could take its own expired event over
    # while the test moves the clock, ending the first claim twice.
    worker = Worker(clocked_client, handle, namespaces=[ns], lease=3.0, wait=0.5, concurrency=1)
    async with running(worker):
        await eventually(lambda: bool(contexts), "the handler started")
        taken = await take_over(clocked_client, ns, clock)
        await eventually(cancelled.is_set, "the stale handler cancelled")
        await eventually(lambda: worker.stats.superseded == 1, "the superseded claim counted")
    stale = contexts[0]
    assert stale.cancelled.is_set()
    with pytest.raises(ClaimSuperseded):
        await clocked_client.complete(stale.event)
    row = await read_event(db, ns, "k")
    assert (row["state"], row["claim_token"]) == ("processing", taken.claim_token)
    await clocked_client.complete(taken)
    assert await state_of(db, ns, "k") == "completed"


async def test_a_sync_handler_that_finishes_after_a_takeover_has_its_complete_refused(
    clocked_client: AsyncInboxClient, db: Database, ns: str, clock: FakeClock
) -> None:
    started = threading.Event()
    saw_cancelled: list[bool] = []

    def handle(ctx: SyncEventContext) -> None:
        started.set()
        saw_cancelled.append(ctx.cancelled.wait(timeout=20))
        # ...and returns as if it had finished: the worker's Complete must be refused.

    await accept(clocked_client, ns, "k")
    worker = Worker(clocked_client, handle, namespaces=[ns], lease=3.0, wait=0.5)
    async with running(worker):
        await eventually(started.is_set, "the handler started")
        taken = await take_over(clocked_client, ns, clock)
        await eventually(lambda: worker.stats.superseded == 1, "the refused Complete counted")
    assert saw_cancelled == [True]
    assert worker.stats.completed == 0
    row = await read_event(db, ns, "k")
    assert (row["state"], row["claim_token"]) == ("processing", taken.claim_token)


async def take_over(client: AsyncInboxClient, ns: str, clock: FakeClock) -> inbox_pb2.ClaimedEvent:
    """Claims the event as another worker once its lease has expired (moving the clock until it has)."""
    claimed: list[inbox_pb2.ClaimedEvent] = []

    async def claim() -> bool:
        clock.advance(10)
        answer = await client.claim(namespaces=[ns], wait=0)
        claimed.extend(answer.events)
        return bool(claimed)

    await eventually(claim, "another worker took the event over", every=0.05)
    return claimed[0]


async def test_stop_lets_handlers_finish_within_grace_and_releases_the_rest_without_counting_attempts(
    client: AsyncInboxClient, db: Database, ns: str
) -> None:
    started: set[str] = set()
    quick_may_finish = asyncio.Event()
    released_handler_cancelled = asyncio.Event()

    async def handle(ctx: EventContext) -> None:
        started.add(ctx.event_key)
        if ctx.event_key == "quick":
            await quick_may_finish.wait()
            return
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            released_handler_cancelled.set()
            raise

    await accept(client, ns, "quick", "stuck")
    worker = Worker(client, handle, namespaces=[ns], concurrency=2, wait=1.0, grace=1.0)
    task = asyncio.create_task(worker.run(handle_signals=False))
    await eventually(lambda: started == {"quick", "stuck"}, "both handlers started")
    worker.stop()
    quick_may_finish.set()
    await asyncio.wait_for(task, 30)
    assert released_handler_cancelled.is_set()
    assert (worker.stats.completed, worker.stats.released) == (1, 1)
    assert await state_of(db, ns, "quick") == "completed"
    stuck = await read_event(db, ns, "stuck")
    assert (stuck["state"], stuck["attempt"]) == ("pending", 0)


async def test_stop_releases_a_sync_handlers_event_and_tells_the_handler(
    client: AsyncInboxClient, db: Database, ns: str
) -> None:
    started = threading.Event()
    told: list[bool] = []

    def handle(ctx: SyncEventContext) -> None:
        started.set()
        told.append(ctx.cancelled.wait(timeout=20))

    await accept(client, ns, "k")
    worker = Worker(client, handle, namespaces=[ns], wait=1.0, grace=0.2)
    task = asyncio.create_task(worker.run(handle_signals=False))
    await eventually(started.is_set, "the handler started")
    worker.stop()
    await asyncio.wait_for(task, 30)
    await eventually(lambda: told == [True], "the handler saw ctx.cancelled")
    assert worker.stats.released == 1
    row = await read_event(db, ns, "k")
    assert (row["state"], row["attempt"]) == ("pending", 0)
