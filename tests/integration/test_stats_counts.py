"""Stats' counts per state are maintained (migration 0028), and stay exactly what a count of the rows says.

Every transition moves them: Accept (one and a batch, concurrent), Claim,
Complete, Fail (retry and dead letter), Replay, a bulk update, a retention
delete, and a rolled-back write that must leave no trace.
"""

from __future__ import annotations

import asyncio

from inboxd.store.database import Database
from inboxd_client.v1 import admin_pb2, inbox_pb2
from inboxd_client.v1.admin_pb2_grpc import InboxAdminServiceStub
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.integration.admin_fixtures import clocked_admin, completed_event, dead_lettered_event
from tests.integration.helpers import accept_request, seconds
from tests.integration.test_claims import claim_one, fenced

__all__ = ["clocked_admin"]  # the fixture, imported so pytest finds it

STATES = ("pending", "processing", "completed", "dead_lettered")


async def counted(db: Database, ns: str) -> tuple[int, ...]:
    async def work(conn: object) -> tuple[int, ...]:
        cur = await conn.execute(  # type: ignore[attr-defined]
            "SELECT state, count(*) FROM inbox_events WHERE namespace = %s GROUP BY state", (ns,)
        )
        found = dict(await cur.fetchall())
        return tuple(int(found.get(s, 0)) for s in STATES)

    return await db.run(work)


async def stated(admin: InboxAdminServiceStub, ns: str) -> tuple[int, ...]:
    answer = (await admin.Stats(admin_pb2.StatsRequest(namespace=ns))).namespaces
    if not answer:
        return (0, 0, 0, 0)
    [s] = answer
    return (s.pending, s.processing, s.completed, s.dead_lettered)


async def test_stats_counts_stay_exact_through_every_transition_concurrent_writes_and_a_rollback(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, db: Database, ns: str
) -> None:
    await completed_event(work, ns, "done")
    await dead_lettered_event(work, ns, "dead")
    await asyncio.gather(*(work.Accept(accept_request(ns, f"one-{i}")) for i in range(20)))
    await work.AcceptBatch(inbox_pb2.AcceptBatchRequest(events=[accept_request(ns, f"b-{i}") for i in range(30)]))
    await work.Accept(accept_request(ns, "one-0"))  # a duplicate: no new row, no count
    assert await stated(clocked_admin, ns) == await counted(db, ns) == (50, 0, 1, 1)

    retrying = await claim_one(work, ns)
    await work.Fail(inbox_pb2.FailRequest(**fenced(retrying), error="x", retry_after=seconds(600)))
    claimed = [await claim_one(work, ns) for _ in range(3)]
    await work.Complete(inbox_pb2.CompleteRequest(**fenced(claimed[0])))
    await clocked_admin.Replay(admin_pb2.ReplayRequest(namespace=ns, event_key="dead", reason="test"))
    doomed = await claim_one(work, ns)
    await work.Fail(inbox_pb2.FailRequest(**fenced(doomed), error="x", permanent=True))
    assert await stated(clocked_admin, ns) == await counted(db, ns)

    async def rolled_back(conn: object) -> None:
        await conn.execute(  # type: ignore[attr-defined]
            "UPDATE inbox_events SET state = 'completed', completed_at = now(), disposition = 'applied', due_at = NULL,"
            " claim_token = NULL, lease_expires_at = NULL WHERE namespace = %s AND state = 'pending'",
            (ns,),
        )
        raise LookupError("rolled back on purpose")

    try:
        await db.run(rolled_back)
    except LookupError:
        pass
    assert await stated(clocked_admin, ns) == await counted(db, ns)

    async def bulk_and_retention(conn: object) -> None:
        # What a bulk ignore and a retention pass do: one statement over many rows each.
        await conn.execute(  # type: ignore[attr-defined]
            "UPDATE inbox_events SET state = 'completed', completed_at = now(), disposition = 'ignored',"
            " disposition_reason = 'bulk', due_at = NULL WHERE namespace = %s AND event_key LIKE 'b-1%%'"
            " AND state = 'pending'",
            (ns,),
        )
        await conn.execute(  # type: ignore[attr-defined]
            "DELETE FROM inbox_events WHERE namespace = %s AND state = 'completed'", (ns,)
        )

    await db.run(bulk_and_retention)
    expected = await counted(db, ns)
    assert expected[2] == 0 and expected[0] > 0 and expected[3] == 1
    assert await stated(clocked_admin, ns) == expected
    # A fold (each Stats runs one) moves figures and never changes them.
    assert await stated(clocked_admin, ns) == expected


async def test_a_namespace_whose_events_are_all_deleted_leaves_stats(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, db: Database, ns: str
) -> None:
    await completed_event(work, ns, "done")
    assert await stated(clocked_admin, ns) == (0, 0, 1, 0)

    async def delete(conn: object) -> None:
        await conn.execute("DELETE FROM inbox_events WHERE namespace = %s", (ns,))  # type: ignore[attr-defined]

    await db.run(delete)
    assert (await clocked_admin.Stats(admin_pb2.StatsRequest(namespace=ns))).namespaces == []
