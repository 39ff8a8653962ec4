"""A handler that hangs is cancelled after the worker's handler timeout, and its event Failed."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

from inboxd.store.database import Database
from inboxd_client import AsyncInboxClient, EventContext, SyncEventContext, Worker, handler_runs
from tests.client.helpers import accept, eventually, read_event, running, state_of

# Each test runs on the Work stream and on unary Claims (tests/client/conftest.py).
pytestmark = pytest.mark.usefixtures("worker_path")


async def test_a_hung_async_handler_is_cancelled_and_its_event_failed_counting_the_attempt(
    client: AsyncInboxClient, db: Database, ns: str
) -> None:
    cancelled: list[bool] = []

    async def hang(ctx: EventContext) -> None:
        try:
            await asyncio.Event().wait()  # never set: a call that never answers
        except asyncio.CancelledError:
            cancelled.append(True)
            # Its Fail's retry is due within a second (full jitter): a worker still claiming would
            # take it again, and hang and be cancelled again, before the test reads attempt 1.
            worker.stop()
            raise

    await accept(client, ns, "k")
    # One slot, held until the handler ends: no other Claim waits to take the retry meanwhile.
    worker = Worker(client, hang, namespaces=[ns], wait=1.0, lease=2.0, handler_timeout=0.5, concurrency=1)
    async with running(worker):
        await eventually(lambda: worker.stats.failed == 1, "the hung event failed")
    assert cancelled == [True]
    row = await read_event(db, ns, "k")
    assert (row["state"], row["attempt"]) == ("pending", 1)
    assert "HandlerTimeout" in row["last_error"] and "handler_timeout" in row["last_error"]


async def test_a_timed_out_sync_handler_that_returns_when_told_is_still_failed(
    client: AsyncInboxClient, db: Database, ns: str
) -> None:
    def hang(ctx: SyncEventContext) -> None:
        ctx.cancelled.wait(30)  # a well-behaved handler stops when told; the time is up all the same

    await accept(client, ns, "k")
    worker = Worker(client, hang, namespaces=[ns], wait=1.0, lease=2.0, handler_timeout=0.5)
    async with running(worker):
        await eventually(lambda: worker.stats.failed == 1, "the timed-out event failed")
    assert worker.stats.completed == 0
    row = await read_event(db, ns, "k")
    assert (row["state"], row["attempt"]) == ("pending", 1)
    assert "HandlerTimeout" in row["last_error"]


async def test_the_handler_timeout_must_be_positive(client: AsyncInboxClient) -> None:
    async def handle(ctx: EventContext) -> None:
        return None

    for bad in (0.0, -1.0):
        try:
            Worker(client, handle, handler_timeout=bad)
        except ValueError as exc:
            assert "handler_timeout" in str(exc)
        else:
            raise AssertionError(f"handler_timeout={bad} was taken")
    assert Worker(client, handle).handler_timeout == 15 * 60
    assert Worker(client, handle, handler_timeout=None).handler_timeout is None


async def test_a_handler_that_swallows_its_cancellation_is_failed_all_the_same(
    client: AsyncInboxClient, db: Database, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(handler_runs, "TIMEOUT_CANCEL_GRACE", 0.3)
    release = asyncio.Event()

    async def stubborn(ctx: EventContext) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await release.wait()  # ignores the cancellation and hangs on

    await accept(client, ns, "k")
    # One slot, which the stubborn handler holds until it returns: its Fail's retry (due within a
    # second, full jitter) is not taken before the worker stops, nor after.
    worker = Worker(client, stubborn, namespaces=[ns], wait=1.0, lease=2.0, handler_timeout=0.5, concurrency=1)
    try:
        async with running(worker):
            await eventually(lambda: worker.stats.failed == 1, "the stubborn event failed")
            worker.stop()
            release.set()  # it holds its slot (and stop's grace) until it returns
    finally:
        release.set()
    row = await read_event(db, ns, "k")
    assert (row["state"], row["attempt"]) == ("pending", 1)
    assert "HandlerTimeout" in row["last_error"]


async def test_a_timed_out_sync_handler_that_ignores_cancellation_keeps_its_slot_until_it_returns(
    client: AsyncInboxClient, db: Database, ns: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(handler_runs, "TIMEOUT_CANCEL_GRACE", 0.3)
    caplog.set_level(logging.WARNING, logger="inboxd_client.worker")
    let_go = threading.Event()
    lock = threading.Lock()
    runs: list[str] = []
    now_running = [0]
    most_running = [0]

    def stubborn(ctx: SyncEventContext) -> None:
        with lock:
            runs.append(ctx.event_key)
            first = len(runs) == 1
            now_running[0] += 1
            most_running[0] = max(most_running[0], now_running[0])
        try:
            if first:
                let_go.wait(30)  # deaf to ctx.cancelled: nothing can stop this thread
        finally:
            with lock:
                now_running[0] -= 1

    await accept(client, ns, "k1", "k2")
    worker = Worker(client, stubborn, namespaces=[ns], concurrency=1, wait=1.0, lease=2.0, handler_timeout=0.5)
    try:
        async with running(worker):
            await eventually(lambda: worker.stats.failed == 1, "the timed-out event failed")
            # The other event is claimable now: a freed slot would start it at
            # once. Nothing signals that it did not, so this waits a while.
            await asyncio.sleep(1.0)
            assert runs == [runs[0]] and most_running[0] == 1, f"ran {runs}, {most_running[0]} at once"
            assert "still runs after its event was Failed: its slot stays taken" in caplog.text
            let_go.set()
            await eventually(lambda: worker.stats.completed == 2, "both events completed once the slot was free")
    finally:
        let_go.set()
    assert most_running[0] == 1
    assert [await state_of(db, ns, k) for k in ("k1", "k2")] == ["completed", "completed"]
