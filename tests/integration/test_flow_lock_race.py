"""A Claim of a limited namespace that finds another Claim counting its slots waits for that one's commit.

Claims of a namespace with a max_in_flight take turns on its advisory lock
(migration 0021). One that finds the lock taken used to take none of the
namespace and answer nothing, or sleep until a wake-up or the fallback poll,
although slots and events were left. Here the test's own transaction holds
the lock, as a Claim in the middle of its statement would, until the Claim
under test has either answered or is seen waiting for it in pg_locks.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import grpc

from inboxd.serving.server import RunningServer
from inboxd.store.database import Database
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import FakeClock
from tests.harness import eventually
from tests.integration.helpers import seconds
from tests.integration.test_flow_claims import accept_many, set_rule
from tests.integration.work_streams import Worker

# The lock Claims of one namespace take turns on (inboxd_flow_slots, inboxd_flow_room).
SLOTS_LOCK = 7311002


async def waiting_for_the_lock(db: Database, namespace: str) -> bool:
    """Whether a session waits for the namespace's slots lock (asked on a connection of its own)."""

    async def read(conn: Any) -> bool:
        cur = await conn.execute(
            "SELECT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            " AND classid = %s AND objid = hashtext(%s)::oid)",
            (SLOTS_LOCK, namespace),
        )
        row = await cur.fetchone()
        return bool(row and row[0])

    return await db.run(read)


async def claim_while_the_lock_is_held(
    work: InboxServiceStub, db: Database, namespace: str, wait: float
) -> inbox_pb2.ClaimResponse:
    """A Claim started while another transaction holds the namespace's lock, released once the Claim waits for it."""
    claimed: asyncio.Future[inbox_pb2.ClaimResponse] | None = None

    async def hold(conn: Any) -> None:
        nonlocal claimed
        await conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (SLOTS_LOCK, namespace))
        request = inbox_pb2.ClaimRequest(namespaces=[namespace], max_events=10, wait=seconds(wait))
        claimed = asyncio.ensure_future(work.Claim(request))
        waiting = asyncio.ensure_future(
            eventually(lambda: waiting_for_the_lock(db, namespace), "a Claim waiting for the lock", within=10)
        )
        await asyncio.wait([claimed, waiting], return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)

    await db.run(hold)  # commits: the lock is released
    assert claimed is not None
    return await asyncio.wait_for(claimed, 15)


async def test_a_claim_that_finds_the_namespace_locked_waits_for_the_holder_and_claims(
    work: InboxServiceStub, db: Database, clock: FakeClock, ns: str
) -> None:
    limited = f"{ns}/smtp"
    await set_rule(db, clock, limited, max_in_flight=5)
    await accept_many(work, limited, 3)
    answer = await claim_while_the_lock_is_held(work, db, limited, wait=0)
    # Before: an empty answer at once, with 5 slots and 3 events left.
    assert len(answer.events) == 3


async def test_a_waiting_claim_that_finds_the_namespace_locked_claims_when_the_holder_commits(
    quiet_server: RunningServer, db: Database, clock: FakeClock, ns: str
) -> None:
    """On a server with no fallback poll: nothing but the holder's commit can hand this Claim its events."""
    limited = f"{ns}/smtp"
    await set_rule(db, clock, limited, max_in_flight=5)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{quiet_server.port}") as channel:
        quiet = InboxServiceStub(channel)
        await accept_many(quiet, limited, 3)
        loop = asyncio.get_running_loop()
        began = loop.time()
        answer = await claim_while_the_lock_is_held(quiet, db, limited, wait=14)
        took = loop.time() - began
    # Before: the events at the Claim's deadline (14.0 s; the lock was released at 10 s, when the test
    # stopped waiting to see the Claim wait for it). The fallback poll, which this server lacks, would
    # otherwise have been the Claim's only second chance.
    assert len(answer.events) == 3
    assert took < 10, f"answered after {took:.1f} s"


async def test_a_work_stream_that_finds_the_namespace_locked_is_pushed_when_the_holder_commits(
    work: InboxServiceStub, db: Database, clock: FakeClock, ns: str
) -> None:
    limited = f"{ns}/smtp"
    await set_rule(db, clock, limited, max_in_flight=5)
    await accept_many(work, limited, 3)
    worker = Worker(work)
    loop = asyncio.get_running_loop()
    began = loop.time()

    async def hold(conn: Any) -> None:
        await conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (SLOTS_LOCK, limited))
        await worker.subscribe([limited], credit=5, lease=60)
        with contextlib.suppress(AssertionError):  # the old code never waits: the lock goes after 10 s
            await eventually(lambda: waiting_for_the_lock(db, limited), "the stream waiting for the lock", within=10)

    await db.run(hold)
    pushed = await worker.pushed(3)
    took = loop.time() - began
    worker.call.cancel()
    assert len(pushed) == 3
    # Before: pushed only after the lock went (10 s) and the next poll looked again.
    assert took < 10, f"pushed after {took:.1f} s"
