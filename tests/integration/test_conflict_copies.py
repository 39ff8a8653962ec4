"""Conflicting copies of a key are bounded: 20 kept whole, the rest counted; GetEvent pages them, payloads on request.

The outside review sent 200 copies of 100 KB under one key and got a 20 MB
GetEvent answer; the console's event page loaded every copy's payload even
with payloads hidden.
"""

from __future__ import annotations

import hashlib
import json

import grpc
import pytest

from inboxd.domain.conflict_copies import KEPT_CONFLICT_COPIES
from inboxd.store.database import Connection, Database
from inboxd_client.v1 import admin_pb2, inbox_pb2
from inboxd_client.v1.admin_pb2_grpc import InboxAdminServiceStub
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.integration.helpers import accept_request, expect_status

CONFLICT = inbox_pb2.ACCEPT_OUTCOME_CONFLICT
EXTRA = 5
PAD = "x" * 2000


def copy_payload(n: int) -> dict[str, object]:
    return {"copy": n, "pad": PAD}


def stored_digest(n: int) -> bytes:
    """SHA-256 of the copy's payload as sent (what the store keeps, byte for byte, and hashes)."""
    return hashlib.sha256(json.dumps(copy_payload(n)).encode()).digest()


async def kept_rows(db: Database, ns: str, key: str) -> int:
    async def work(conn: Connection) -> int:
        cur = await conn.execute(
            "SELECT count(*) FROM inbox_conflicts WHERE namespace = %s AND event_key = %s", (ns, key)
        )
        row = await cur.fetchone()
        return int(row[0]) if row else -1

    return await db.run(work)


async def accept_with_copies(inbox: InboxServiceStub, ns: str, copies: int) -> None:
    await inbox.Accept(accept_request(ns, "k", {"original": True}))
    for n in range(copies):
        answer = await inbox.Accept(accept_request(ns, "k", copy_payload(n)))
        assert answer.outcome == CONFLICT


async def test_past_the_kept_copies_a_key_only_counts_conflicts_with_the_last_ones_digest(
    inbox: InboxServiceStub, admin: InboxAdminServiceStub, db: Database, ns: str
) -> None:
    total = KEPT_CONFLICT_COPIES + EXTRA
    await accept_with_copies(inbox, ns, total)
    assert await kept_rows(db, ns, "k") == KEPT_CONFLICT_COPIES
    answer = await admin.GetEvent(admin_pb2.GetEventRequest(namespace=ns, event_key="k"))
    event = answer.event
    assert event.conflict_count == total
    assert len(event.conflicts) == KEPT_CONFLICT_COPIES
    assert answer.conflicts_next_page_token == ""
    assert event.conflicts_overflow.copies == EXTRA
    assert event.conflicts_overflow.last_payload_sha256 == stored_digest(total - 1)
    assert (
        event.conflicts_overflow.first_received_at.ToDatetime()
        <= event.conflicts_overflow.last_received_at.ToDatetime()
    )


async def test_one_batch_of_many_copies_keeps_no_more_than_the_bound(
    inbox: InboxServiceStub, admin: InboxAdminServiceStub, db: Database, ns: str
) -> None:
    await inbox.Accept(accept_request(ns, "k", {"original": True}))
    batch = [accept_request(ns, "k", copy_payload(n)) for n in range(KEPT_CONFLICT_COPIES + 10)]
    results = (await inbox.AcceptBatch(inbox_pb2.AcceptBatchRequest(events=batch))).results
    assert {r.outcome for r in results} == {CONFLICT}
    assert await kept_rows(db, ns, "k") == KEPT_CONFLICT_COPIES
    event = (await admin.GetEvent(admin_pb2.GetEventRequest(namespace=ns, event_key="k"))).event
    assert (event.conflict_count, event.conflicts_overflow.copies) == (KEPT_CONFLICT_COPIES + 10, 10)


async def test_get_event_leaves_the_copies_payloads_out_unless_asked_and_names_each_by_digest(
    inbox: InboxServiceStub, admin: InboxAdminServiceStub, ns: str
) -> None:
    await accept_with_copies(inbox, ns, 3)
    plain = (await admin.GetEvent(admin_pb2.GetEventRequest(namespace=ns, event_key="k"))).event
    assert [c.payload for c in plain.conflicts] == [b"", b"", b""]
    assert [c.payload_sha256 for c in plain.conflicts] == [stored_digest(n) for n in range(3)]
    assert all(c.payload_size > len(PAD) for c in plain.conflicts)
    assert plain.ByteSize() < 2000, "no copy's payload travels unasked"
    asked = await admin.GetEvent(admin_pb2.GetEventRequest(namespace=ns, event_key="k", include_conflict_payloads=True))
    assert [json.loads(c.payload)["copy"] for c in asked.event.conflicts] == [0, 1, 2]


async def test_get_event_pages_the_kept_copies_in_arrival_order_without_repeats(
    inbox: InboxServiceStub, admin: InboxAdminServiceStub, ns: str
) -> None:
    await accept_with_copies(inbox, ns, 17)
    seen: list[bytes] = []
    token = ""
    pages = 0
    while True:
        answer = await admin.GetEvent(
            admin_pb2.GetEventRequest(namespace=ns, event_key="k", conflicts_page_size=7, conflicts_page_token=token)
        )
        seen += [c.payload_sha256 for c in answer.event.conflicts]
        pages += 1
        token = answer.conflicts_next_page_token
        if not token:
            break
    assert pages == 3
    assert seen == [stored_digest(n) for n in range(17)]


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"conflicts_page_size": 101}, "conflicts_page_size"),
        ({"conflicts_page_size": -1}, "conflicts_page_size"),
        ({"conflicts_page_token": "nonsense"}, "conflicts_page_token"),
        ({"conflicts_page_token": "c1.!!"}, "conflicts_page_token"),
    ],
)
async def test_a_bad_conflicts_page_is_invalid_argument_naming_its_field(
    inbox: InboxServiceStub, admin: InboxAdminServiceStub, ns: str, fields: dict[str, object], named: str
) -> None:
    await inbox.Accept(accept_request(ns, "k"))
    call = admin.GetEvent(admin_pb2.GetEventRequest(namespace=ns, event_key="k", **fields))  # type: ignore[arg-type]
    error = await expect_status(call, grpc.StatusCode.INVALID_ARGUMENT)
    assert named in (error.details() or "")
