"""A chunk that meets an event another transaction holds: waited for, then judged as it stands, never passed unseen.

A Claim locks the PENDING events it looks at; one it lets go (its caller
gone, its transaction rolled back) is still PENDING and still matches. A
chunk that skipped locked rows (SKIP LOCKED) passed such an event for good
and counted it "moved on": the operation ended DONE with the event untouched.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from inboxd.serving.server import RunningServer
from inboxd.store.bulk_operations import CHUNK_LOCK_TIMEOUT
from inboxd.store.database import Database
from inboxd_client.v1.admin_pb2_grpc import InboxAdminServiceStub
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.integration.bulk_fixtures import DONE, IGNORE, PENDING, audit_rows, carry, get, key, start, states
from tests.integration.helpers import accept_request
from tests.integration.procs import poll

EVENTS = 3
# How long a chunk waits for a held match.
CHUNK_SECONDS = 2
assert CHUNK_LOCK_TIMEOUT == f"{CHUNK_SECONDS}s"


async def _chunk_waits_on_a_lock(db: Database) -> bool:
    async def read(conn: Any) -> bool:
        cur = await conn.execute(
            "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
            ("%inbox_bulk_matches%",),
        )
        return await cur.fetchone() is not None

    waiting: bool = await db.run(read)
    return waiting


async def _hold_then(
    server: RunningServer, db: Database, migrated_url: str, ns: str, op_id: str, held: str, *, let_go: str
) -> None:
    """Carries the operation while another transaction holds event `held` FOR UPDATE; then `let_go` ends it."""
    async with await psycopg.AsyncConnection.connect(migrated_url) as other:
        await other.execute("SELECT 1 FROM inbox_events WHERE namespace = %s AND event_key = %s FOR UPDATE", (ns, held))
        carrying = asyncio.create_task(carry(server, op_id))

        async def chunk_met_the_lock() -> bool | None:
            return True if carrying.done() or await _chunk_waits_on_a_lock(db) else None

        await poll(chunk_met_the_lock, within=15, interval=0.02)
        if let_go == "late":
            # Past the chunk's lock timeout: it rolls back whole, backs off and comes back; the operation goes on.
            await asyncio.sleep(CHUNK_SECONDS + 1)
            assert not carrying.done(), "the operation ended while a match was held"
        if let_go in ("rollback", "late"):
            await other.rollback()
        else:
            await other.execute(let_go, (ns, held))
            await other.commit()
        await asyncio.wait_for(carrying, 30)


@pytest.mark.parametrize(
    "let_go",
    [
        "rollback",
        "late",
        # Written meanwhile, but still PENDING and still matching: a new row version the chunk's snapshot never saw.
        "UPDATE inbox_events SET updated_at = updated_at WHERE namespace = %s AND event_key = %s",
    ],
    ids=["rolled-back", "held-past-the-lock-timeout", "rewritten"],
)
async def test_an_ignore_chunk_ignores_a_pending_event_a_claim_held_and_let_go(
    server: RunningServer,
    inbox: InboxServiceStub,
    admin: InboxAdminServiceStub,
    db: Database,
    migrated_url: str,
    ns: str,
    let_go: str,
) -> None:
    for i in range(EVENTS):
        await inbox.Accept(accept_request(ns, key(i)))
    started = await start(admin, ns, IGNORE, reason="a bad import", filter_={"states": [PENDING]})
    assert started.operation.matched == EVENTS
    await _hold_then(server, db, migrated_url, ns, started.operation.id, key(1), let_go=let_go)
    ended = await get(admin, started.operation.id)
    assert (ended.state, ended.done, ended.skipped) == (DONE, EVENTS, 0), (ended.done, ended.skipped)
    assert set((await states(db, ns)).values()) == {"completed"}
    assert len(await audit_rows(db, started.operation.id)) == EVENTS
