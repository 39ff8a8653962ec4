"""A Replay of a keyed event at or below its key's applied revision is delivered, `stale` set.

Issue 25, item 4: the next Claim judged a replayed event stale and completed
it IGNORED over its APPLIED, so an operator could never re-run the latest
applied event of a key. DESIGN (Fine print, Ordering keys): a replayed event
is delivered even when stale, the worker decides, and the disposition it had
stays in its history.
"""

from __future__ import annotations

from typing import Any

from inboxd.store.database import Database
from inboxd_client.v1 import admin_pb2, inbox_pb2, types_pb2
from inboxd_client.v1.admin_pb2_grpc import InboxAdminServiceStub
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import FakeClock
from tests.integration.admin_fixtures import clocked_admin
from tests.integration.helpers import accept_request, read_event
from tests.integration.test_claims import claim_none, claim_one, fenced

__all__ = ["clocked_admin"]  # the fixture, imported so pytest finds it


async def _applied(work: InboxServiceStub, ns: str, key: str, revision: int) -> None:
    await work.Accept(accept_request(ns, key, ordering_key="customer-1", revision=revision))
    event = await claim_one(work, ns, max_events=10)
    assert event.event_key == key
    await work.Complete(inbox_pb2.CompleteRequest(**fenced(event)))


async def _replay(admin: InboxAdminServiceStub, ns: str, key: str) -> None:
    await admin.Replay(admin_pb2.ReplayRequest(namespace=ns, event_key=key, reason="the downstream lost it"))


async def _replay_audit(db: Database, ns: str, key: str) -> list[tuple[str, str | None, str | None]]:
    async def look(conn: Any) -> list[tuple[str, str | None, str | None]]:
        cur = await conn.execute(
            "SELECT state_before, disposition_before, disposition_reason_before FROM inbox_replays"
            " WHERE namespace = %s AND event_key = %s ORDER BY id",
            (ns, key),
        )
        return [tuple(row) for row in await cur.fetchall()]

    result: list[tuple[str, str | None, str | None]] = await db.run(look)
    return result


async def test_a_replay_of_the_latest_applied_event_of_a_key_is_delivered_stale(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, db: Database, ns: str
) -> None:
    await _applied(work, ns, "v5", revision=5)
    await _replay(clocked_admin, ns, "v5")
    again = await claim_one(work, ns, max_events=10)
    assert (again.event_key, again.stale, again.applied_revision, again.attempt) == ("v5", True, 5, 1)
    row = await read_event(db, ns, "v5")
    assert (row["state"], row["disposition"]) == ("processing", None)
    # The worker decides; here it applies it again.
    await work.Complete(inbox_pb2.CompleteRequest(**fenced(again)))
    row = await read_event(db, ns, "v5")
    assert (row["state"], row["disposition"]) == ("completed", "applied")


async def test_the_disposition_a_replayed_event_had_stays_in_its_replay_audit(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, db: Database, ns: str
) -> None:
    await _applied(work, ns, "v5", revision=5)
    await _replay(clocked_admin, ns, "v5")
    again = await claim_one(work, ns, max_events=10)
    await work.Complete(
        inbox_pb2.CompleteRequest(**fenced(again), disposition=types_pb2.DISPOSITION_IGNORED, reason="already sent")
    )
    await _replay(clocked_admin, ns, "v5")
    assert await _replay_audit(db, ns, "v5") == [
        ("completed", "applied", ""),
        ("completed", "ignored", "already sent"),
    ]


async def test_a_replayed_stale_event_waits_for_its_key_and_goes_before_a_newer_revision(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, ns: str
) -> None:
    await _applied(work, ns, "v5", revision=5)
    await _replay(clocked_admin, ns, "v5")
    await work.Accept(accept_request(ns, "v6", ordering_key="customer-1", revision=6))
    # One event of the key at a time, in revision order: the replayed v5 first.
    answer = await work.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], max_events=10))
    assert [(e.event_key, e.stale) for e in answer.events] == [("v5", True)]
    await claim_none(work, ns)
    await work.Complete(inbox_pb2.CompleteRequest(**fenced(answer.events[0])))
    nxt = await claim_one(work, ns, max_events=10)
    assert (nxt.event_key, nxt.stale) == ("v6", False)


async def test_a_replayed_stale_event_that_fails_is_delivered_again_after_its_backoff(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, clock: FakeClock, db: Database, ns: str
) -> None:
    await _applied(work, ns, "v5", revision=5)
    await _replay(clocked_admin, ns, "v5")
    first = await claim_one(work, ns, max_events=10)
    await work.Fail(inbox_pb2.FailRequest(**fenced(first), error="downstream down"))
    clock.advance(120)
    second = await claim_one(work, ns, max_events=10)
    assert (second.event_key, second.stale, second.attempt) == ("v5", True, 2)
