"""A Claim whose caller cancels as work arrives: what the server can release, and the bound where it cannot.

Issue 25, item 10. A cancellation that reaches the server before its answer
is written (the claim statement still running, say) releases what the claim
took, its attempt given back, at once. One that crosses the answer on the
wire cannot be seen by any server (grpc.aio tells a unary handler nothing
after it returns: `context.cancelled()` stays False and a done callback learns
nothing), so those events stay leased until the Claim's own lease ends: the
bound is the `lease` the caller asked for (docs/reliability.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from inboxd.config.settings import Settings
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.harness import eventually
from tests.integration.helpers import accept_request, read_event, seconds


@pytest.fixture
async def own_server(settings: Settings, db: Database) -> AsyncIterator[RunningServer]:
    running = await start_server(settings, db)
    yield running
    await running.stop(1.0)


async def _claims_waiting_on_a_lock(db: Database) -> int:
    async def look(conn: Any) -> int:
        cur = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND query LIKE '-- inboxd: event_claim%%'"
        )
        row = await cur.fetchone()
        return int(row[0])

    count: int = await db.run(look)
    return count


async def test_a_long_poll_cancelled_by_its_caller_as_work_arrives_leaves_nothing_leased(
    own_server: RunningServer, db: Database, ns: str
) -> None:
    locked, unlock = asyncio.Event(), asyncio.Event()

    async def hold_claims_ledger(conn: Any) -> None:
        # The claim statement writes inbox_claims; Accept does not. Held, it
        # keeps the woken Claim inside its statement while its caller cancels.
        await conn.execute("LOCK TABLE inbox_claims IN EXCLUSIVE MODE")
        locked.set()
        await unlock.wait()

    async with grpc.aio.insecure_channel(f"127.0.0.1:{own_server.port}") as channel:
        stub = InboxServiceStub(channel)
        call = stub.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], wait=seconds(30)), timeout=35)
        await eventually(lambda: len(own_server.inbox.bus) > 0, "the Claim to wait")
        holder = asyncio.create_task(db.run(hold_claims_ledger))
        await locked.wait()
        await stub.Accept(accept_request(ns, "k"))

        async def claiming() -> bool:
            return await _claims_waiting_on_a_lock(db) > 0

        await eventually(claiming, "the woken Claim to be inside its statement")
        call.cancel()
        await eventually(lambda: len(own_server.inbox.bus) == 0, "the server to see the cancellation")
        unlock.set()
        await holder

    async def released() -> bool:
        row = await read_event(db, ns, "k")
        return bool(row["state"] == "pending" and row["fencing_token"] is not None)

    # Well within the 30 s lease the Claim asked for: released, not expired.
    await eventually(released, "the cancelled Claim's event to be released", within=5)
    row = await read_event(db, ns, "k")
    assert (row["attempt"], row["claim_token"]) == (0, None)
