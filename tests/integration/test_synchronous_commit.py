"""A COMMIT that the synchronous standby never confirmed is not acknowledged, not even by a retry.

With a synchronous standby, PostgreSQL holds each COMMIT until the standby
has its WAL. A COMMIT held there and then cancelled (an operator's
pg_cancel_backend, a pooler's cancel) is committed on the primary only: the
client gets a WARNING and success. If the primary dies before the standby
catches up, the promoted standby never had it. inboxd must answer such a call
UNAVAILABLE, never OK. The caller's retry then finds the earlier write (Accept
and Complete are idempotent), and every OK is as durable as the first: the
retry's answer waits for the standby too, though it writes nothing of its own.

The clients here are the default ones, whose RetryPolicy retries UNAVAILABLE
by itself: the very call that met the cancelled wait must not return OK while
the standby is still cut off.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import TypeVar

from inboxd.serving.embedded_pg import EmbeddedPostgres
from inboxd_client import AcceptOutcome, AsyncInboxClient
from tests.harness import eventually
from tests.reliability.replication import (
    ReplicatedPair,
    cut_off_standby,
    held_commit_xids,
    replicated_pair,
    wal_sender,
)
from tests.reliability.rig import query, serving

NS = "sync/cancelled"
T = TypeVar("T")


@asynccontextmanager
async def standby_cut_off(pair: ReplicatedPair) -> AsyncIterator[None]:
    """The WAL sender stopped for the block: every COMMIT waits for the standby until it ends."""
    sender = await wal_sender(pair.primary)
    cut_off_standby(sender)
    try:
        yield
    finally:
        os.kill(sender, signal.SIGCONT)


async def retried_while_held(primary: EmbeddedPostgres, call: Awaitable[T]) -> asyncio.Task[T]:
    """Runs `call`, cancels its COMMIT's wait for the standby, and waits until the client's retry is held too.

    Answers the call's task, still running. The retry's COMMIT is another
    transaction (another xid) waiting for the standby; a retry that answered
    without waiting ends the task instead, and the test says so.
    """
    task = asyncio.ensure_future(call)

    async def first_held() -> bool:
        return bool(await held_commit_xids(primary))

    await eventually(first_held, "the call's COMMIT waits for the standby", within=30.0)
    first = await held_commit_xids(primary)
    await query(primary.conninfo, "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'")

    async def retry_held_or_answered() -> bool:
        return task.done() or bool(await held_commit_xids(primary) - first)

    await eventually(retry_held_or_answered, "the client's retry is held or answered", within=30.0)
    if task.done():
        raise AssertionError(
            f"answered {task.result()!r} while the standby was cut off: the earlier write may not be on it"
        )
    return task


async def on_standby(pair: ReplicatedPair, event_key: str, state: str) -> None:
    async def there() -> bool:
        rows = await query(
            pair.standby.conninfo,
            "SELECT state FROM inbox_events WHERE namespace = %s AND event_key = %s",
            (NS, event_key),
        )
        return rows == [(state,)]

    await eventually(there, f"the standby holds {event_key!r} as {state}", within=30.0)


async def test_an_accept_whose_commit_was_not_confirmed_is_not_acknowledged_by_its_retry() -> None:
    async with replicated_pair(synchronous=True) as pair, serving(pair.url) as server:
        async with AsyncInboxClient(server.target) as inbox:
            first = await inbox.accept(NS, "confirmed", "order.shipped", {"n": 1})
            assert first.outcome == AcceptOutcome.ACCEPT_OUTCOME_ACCEPTED
            async with standby_cut_off(pair):
                held = await retried_while_held(pair.primary, inbox.accept(NS, "held", "order.shipped", {"n": 2}))
            # The standby confirmed the retry's COMMIT, and with it the row committed before it.
            again = await held
            assert again.outcome == AcceptOutcome.ACCEPT_OUTCOME_DUPLICATE
            await on_standby(pair, "held", "pending")


async def test_a_complete_whose_commit_was_not_confirmed_is_not_acknowledged_by_its_retry() -> None:
    async with replicated_pair(synchronous=True) as pair, serving(pair.url) as server:
        async with AsyncInboxClient(server.target) as inbox:
            await inbox.accept(NS, "done", "order.shipped", {"n": 1})
            [event] = (await inbox.claim(namespaces=[NS], max_events=1)).events
            async with standby_cut_off(pair):
                held = await retried_while_held(pair.primary, inbox.complete(event))
            await held  # already completed by this very claim: OK, once the standby has the completion
            await on_standby(pair, "done", "completed")
