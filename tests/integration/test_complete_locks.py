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
from datetime import timedelta

import grpc
import psycopg
import pytest

from inboxd.domain.errors import InboxError
from inboxd.domain.vocabulary import ClaimRequest, Completion, Disposition, EventKey, Fence, Namespace, NewEvent
from inboxd.store.database import Database
from inboxd.usecases.inbox import Inbox
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import CLOCKED_SETTINGS
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


async def test_a_row_held_in_passing_is_completed_in_a_later_group_not_alone(
    db: Database,
    ns: str,
    worker_transaction: psycopg.AsyncConnection[tuple[object, ...]],
) -> None:
    """A SKIP LOCKED claim locks a row it then finds taken, until it commits: the item rides the next group.

    Before, every such item waited alone (its own transaction, six round trips): 2.7%
    of the items under Claim 10 -> CompleteBatch, 15% of PostgreSQL's time.
    """
    groups: list[list[str]] = []
    alone: list[str] = []

    class Recording(Inbox):
        async def _complete_group(self, completions: list[Completion]) -> list[InboxError | None]:
            results = await super()._complete_group(completions)
            groups.append([c.fence.event_key for c in completions])
            if len(groups) == 1:
                await worker_transaction.commit()  # the holder commits between two groups
            return results

        async def _complete_held(self, completion: Completion) -> InboxError | None:
            alone.append(completion.fence.event_key)
            return await super()._complete_held(completion)

    inbox = Recording(db, CLOCKED_SETTINGS)
    await inbox.accept([NewEvent(Namespace(ns), EventKey(key), "t", b"{}") for key in ("held", "free")])
    claimed = await inbox.claim(
        ClaimRequest(
            namespaces=(ns,),
            event_types=(),
            max_events=2,
            lease=timedelta(seconds=30),
            wait=timedelta(0),
            worker_id="w",
        )
    )
    await worker_transaction.execute(
        "SELECT 1 FROM inbox_events WHERE namespace = %s AND event_key = 'held' FOR NO KEY UPDATE", (ns,)
    )
    results = await inbox.complete_many(
        [Completion(Fence(e.namespace, e.event_key, e.claim_token), Disposition.APPLIED, "") for e in claimed.events]
    )
    assert results == [None, None]
    assert sorted(groups[0]) == ["free", "held"] and groups[1:] == [["held"]]
    assert alone == []
    assert (await read_event(db, ns, "held"))["state"] == "completed"
