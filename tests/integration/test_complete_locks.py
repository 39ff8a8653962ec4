"""Completion and row locks: a row held for long by a worker's own transaction stalls nothing else.

A worker whose business data lives in inboxd's PostgreSQL completes inside its
own transaction (`inboxd_complete()`), and holds the event's row until it
commits. Meanwhile a gRPC Complete of the same event (a client's retry, say)
must not hold back the other completions the server groups with it, nor the
foreign-key checks of rows inserted for that event.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import psycopg
import pytest

from inboxd.store.database import Database
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.harness import eventually
from tests.integration.helpers import accept_request, read_event


async def claimed(inbox: InboxServiceStub, ns: str, *keys: str) -> dict[str, inbox_pb2.ClaimedEvent]:
    for key in keys:
        await inbox.Accept(accept_request(ns, key))
    answer = await inbox.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], max_events=len(keys)))
    return {e.event_key: e for e in answer.events}


def complete_request(event: inbox_pb2.ClaimedEvent) -> inbox_pb2.CompleteRequest:
    return inbox_pb2.CompleteRequest(
        namespace=event.namespace, event_key=event.event_key, claim_token=event.claim_token
    )


@pytest.fixture
async def worker_transaction(migrated_url: str) -> AsyncIterator[psycopg.AsyncConnection[tuple[object, ...]]]:
    """A worker's connection, in an open transaction the test ends (rolled back if it does not)."""
    conn = await psycopg.AsyncConnection.connect(migrated_url)
    try:
        yield conn
    finally:
        await conn.rollback()
        await conn.close()


async def lock_waiters(db: Database) -> int:
    async def work(conn: psycopg.AsyncConnection[tuple[object, ...]]) -> int:
        cur = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
            ("%inboxd_complete%",),
        )
        row = await cur.fetchone()
        assert row is not None
        return int(str(row[0]))

    return await db.run(work)


async def test_a_row_held_by_a_worker_transaction_does_not_stall_other_completions(
    inbox: InboxServiceStub,
    db: Database,
    ns: str,
    worker_transaction: psycopg.AsyncConnection[tuple[object, ...]],
) -> None:
    events = await claimed(inbox, ns, "held", "free")
    held, free = events["held"], events["free"]
    # The worker completes "held" in its business transaction, and has not committed yet.
    await worker_transaction.execute(
        "SELECT inboxd_complete(%s, %s, %s)", (held.namespace, held.event_key, held.claim_token)
    )
    # Two retries of that same Complete arrive through gRPC, one after the other...
    retries: list[asyncio.Task[inbox_pb2.CompleteResponse]] = []
    for _ in range(2):
        retries.append(asyncio.ensure_future(inbox.Complete(complete_request(held), timeout=30)))
        expected = len(retries)

        async def reached_the_lock() -> bool:
            return await lock_waiters(db) + sum(t.done() for t in retries) >= expected  # noqa: B023

        await eventually(reached_the_lock, "the retried Complete to reach the held row")
    # ...and another event's Complete must still be answered while the worker's transaction is open.
    await inbox.Complete(complete_request(free), timeout=10)
    assert (await read_event(db, ns, "free"))["state"] == "completed"
    for retry in retries:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await retry
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "locked by another transaction" in (caught.value.details() or "")
    # The worker commits: its completion stands, and a retry now answers OK (same token).
    await worker_transaction.commit()
    await inbox.Complete(complete_request(held))
    assert (await read_event(db, ns, "held"))["state"] == "completed"


async def test_a_completion_in_progress_does_not_block_foreign_key_checks_on_its_event(
    inbox: InboxServiceStub,
    migrated_url: str,
    ns: str,
    worker_transaction: psycopg.AsyncConnection[tuple[object, ...]],
) -> None:
    event = (await claimed(inbox, ns, "k"))["k"]
    await worker_transaction.execute(
        "SELECT inboxd_complete(%s, %s, %s)", (event.namespace, event.event_key, event.claim_token)
    )
    # A conflicting copy of the same event arrives meanwhile: its row references the event.
    async with await psycopg.AsyncConnection.connect(migrated_url) as other, other.transaction():
        await other.execute("SET LOCAL lock_timeout = '5s'")
        await other.execute(
            "INSERT INTO inbox_conflicts (namespace, event_key, event_type, payload, received_at)"
            " VALUES (%s, %s, 'test.event', '{}', now())",
            (event.namespace, event.event_key),
        )
