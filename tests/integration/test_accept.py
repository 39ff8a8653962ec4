"""Accept: insert-if-absent, answered only after commit, every repeat classified."""

from __future__ import annotations

import asyncio
import json

import grpc

from inboxd.store.database import Database
from inboxd_client.v1 import inbox_pb2, types_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.integration.helpers import accept_request

ACCEPTED = inbox_pb2.ACCEPT_OUTCOME_ACCEPTED
DUPLICATE = inbox_pb2.ACCEPT_OUTCOME_DUPLICATE
CONFLICT = inbox_pb2.ACCEPT_OUTCOME_CONFLICT


async def count_rows(db: Database, ns: str, table: str = "inbox_events") -> int:
    async def work(conn: object) -> int:
        cur = await conn.execute(f"SELECT count(*) FROM {table} WHERE namespace = %s", (ns,))  # type: ignore[attr-defined]
        row = await cur.fetchone()
        return int(row[0])

    return await db.run(work)


async def test_first_accept_is_accepted_and_a_repeat_is_duplicate(inbox: InboxServiceStub, ns: str) -> None:
    first = await inbox.Accept(accept_request(ns, "evt-1"))
    again = await inbox.Accept(accept_request(ns, "evt-1"))
    assert first.outcome == ACCEPTED
    assert first.state == types_pb2.EVENT_STATE_PENDING
    assert again.outcome == DUPLICATE
    assert again.accepted_at == first.accepted_at


async def test_200_concurrent_accepts_of_one_key_store_one_row(inbox: InboxServiceStub, db: Database, ns: str) -> None:
    calls = [inbox.Accept(accept_request(ns, "storm", {"n": 1})) for _ in range(200)]
    outcomes = [r.outcome for r in await asyncio.gather(*calls)]
    assert outcomes.count(ACCEPTED) == 1
    assert outcomes.count(DUPLICATE) == 199
    assert await count_rows(db, ns) == 1


async def test_payloads_are_compared_as_json_values(inbox: InboxServiceStub, ns: str) -> None:
    await inbox.Accept(accept_request(ns, "k", b'{"a": 1, "b": [1, 2]}'))
    reordered = await inbox.Accept(accept_request(ns, "k", b'{  "b":[1,2],"a":1}'))
    assert reordered.outcome == DUPLICATE


async def test_metadata_is_stored_but_never_compared(inbox: InboxServiceStub, ns: str) -> None:
    await inbox.Accept(accept_request(ns, "k", metadata={"delivery_id": "d1"}))
    redelivered = await inbox.Accept(accept_request(ns, "k", metadata={"delivery_id": "d2", "attempt": "2"}))
    assert redelivered.outcome == DUPLICATE


async def test_another_payload_is_a_conflict_that_keeps_the_original_and_records_the_copy(
    inbox: InboxServiceStub, db: Database, ns: str
) -> None:
    await inbox.Accept(accept_request(ns, "k", {"amount": 10}))
    answer = await inbox.Accept(accept_request(ns, "k", {"amount": 99}, metadata={"delivery_id": "d9"}))
    assert answer.outcome == CONFLICT

    async def stored(conn: object) -> tuple[object, ...]:
        cur = await conn.execute(  # type: ignore[attr-defined]
            "SELECT inboxd_payload_json(e), inboxd_payload_json(c), c.metadata, c.received_at IS NOT NULL"
            " FROM inbox_events e JOIN inbox_conflicts c USING (namespace, event_key) WHERE e.namespace = %s",
            (ns,),
        )
        return tuple(await cur.fetchone())

    original, copy, copy_metadata, has_time = await db.run(stored)
    assert original == {"amount": 10}
    assert copy == {"amount": 99}
    assert copy_metadata == {"delivery_id": "d9"}
    assert has_time


async def test_the_same_key_in_another_namespace_is_a_distinct_event(inbox: InboxServiceStub, ns: str) -> None:
    assert (await inbox.Accept(accept_request(ns, "k"))).outcome == ACCEPTED
    assert (await inbox.Accept(accept_request(ns + "-other", "k"))).outcome == ACCEPTED


async def test_the_same_key_with_another_event_type_is_a_conflict(inbox: InboxServiceStub, ns: str) -> None:
    await inbox.Accept(accept_request(ns, "msg-1", event_type="message.received"))
    junk = await inbox.Accept(accept_request(ns, "msg-1", event_type="message.junk"))
    assert junk.outcome == CONFLICT


async def test_available_at_delays_the_event(inbox: InboxServiceStub, db: Database, ns: str) -> None:
    later = inbox_pb2.AcceptRequest().available_at.__class__(seconds=4_000_000_000)
    await inbox.Accept(accept_request(ns, "later", available_at=later))

    async def read(conn: object) -> tuple[object, ...]:
        cur = await conn.execute(  # type: ignore[attr-defined]
            "SELECT extract(epoch FROM available_at)::bigint FROM inbox_events WHERE namespace = %s", (ns,)
        )
        return tuple(await cur.fetchone())

    assert (await db.run(read))[0] == 4_000_000_000


async def test_accept_batch_answers_in_order_and_classifies_repeats_within_the_batch(
    inbox: InboxServiceStub, db: Database, ns: str
) -> None:
    await inbox.Accept(accept_request(ns, "old"))
    batch = inbox_pb2.AcceptBatchRequest(
        events=[
            accept_request(ns, "z-new"),
            accept_request(ns, "old"),
            accept_request(ns, "a-new", {"v": 1}),
            accept_request(ns, "a-new", {"v": 1}),
            accept_request(ns, "a-new", {"v": 2}),
            accept_request(ns, "z-new"),
        ]
    )
    answer = await inbox.AcceptBatch(batch)
    assert [r.outcome for r in answer.results] == [ACCEPTED, DUPLICATE, ACCEPTED, DUPLICATE, CONFLICT, DUPLICATE]
    assert await count_rows(db, ns) == 3
    assert await count_rows(db, ns, "inbox_conflicts") == 1


async def test_accept_batch_of_500_is_taken_in_one_call(inbox: InboxServiceStub, db: Database, ns: str) -> None:
    batch = inbox_pb2.AcceptBatchRequest(events=[accept_request(ns, f"k{i}") for i in range(500)])
    answer = await inbox.AcceptBatch(batch)
    assert len(answer.results) == 500
    assert all(r.outcome == ACCEPTED for r in answer.results)
    assert await count_rows(db, ns) == 500


async def test_a_failed_batch_transaction_leaves_none_of_its_events(
    inbox: InboxServiceStub, db: Database, ns: str
) -> None:
    # A trigger that fails the transaction after earlier rows of the batch were inserted. It fires
    # for this test's namespace only: other tests share inbox_events.
    async def install(conn: object) -> None:
        # One statement per execute: the pool's connections prepare what they run.
        await conn.execute(  # type: ignore[attr-defined]
            """
            CREATE OR REPLACE FUNCTION test_explode() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              IF NEW.event_type = 'test.explode' THEN RAISE EXCEPTION 'boom'; END IF;
              RETURN NEW;
            END $$
            """
        )
        await conn.execute(  # type: ignore[attr-defined]
            f"CREATE TRIGGER test_explode BEFORE INSERT ON inbox_events FOR EACH ROW"
            f" WHEN (NEW.namespace = '{ns}') EXECUTE FUNCTION test_explode()"
        )

    async def remove(conn: object) -> None:
        await conn.execute("DROP TRIGGER test_explode ON inbox_events")  # type: ignore[attr-defined]

    await db.run(install)
    try:
        batch = inbox_pb2.AcceptBatchRequest(
            events=[
                accept_request(ns, "a"),
                accept_request(ns, "b"),
                accept_request(ns, "c", event_type="test.explode"),
            ]
        )
        try:
            await inbox.AcceptBatch(batch)
            raise AssertionError("the batch should have failed")
        except grpc.aio.AioRpcError as exc:
            # A definite refusal: never UNKNOWN (an unhandled crash), and an INVALID_ARGUMENT names the event.
            assert exc.code() in (grpc.StatusCode.INTERNAL, grpc.StatusCode.INVALID_ARGUMENT), exc.code()
            if exc.code() == grpc.StatusCode.INVALID_ARGUMENT:
                assert "events[2]" in (exc.details() or ""), exc.details()
    finally:
        await db.run(remove)
    assert await count_rows(db, ns) == 0


async def test_payload_is_stored_as_given_json(inbox: InboxServiceStub, db: Database, ns: str) -> None:
    body = {"text": "héllo 😀", "n": 1.50, "nested": {"list": [True, None]}}
    await inbox.Accept(accept_request(ns, "k", json.dumps(body).encode()))

    async def read(conn: object) -> object:
        cur = await conn.execute(  # type: ignore[attr-defined]
            "SELECT inboxd_payload_json(e) FROM inbox_events AS e WHERE namespace = %s", (ns,)
        )
        return (await cur.fetchone())[0]

    assert await db.run(read) == body


async def test_a_batch_cut_off_by_its_deadline_is_stored_whole_or_not_at_all(
    inbox: InboxServiceStub, db: Database, ns: str
) -> None:
    outcomes = set()
    for attempt in range(20):
        space = f"{ns}-{attempt}"
        batch = inbox_pb2.AcceptBatchRequest(events=[accept_request(space, f"k{i}") for i in range(500)])
        try:
            await inbox.AcceptBatch(batch, timeout=0.002 * (attempt + 1))
            outcomes.add("answered")
        except grpc.aio.AioRpcError as exc:
            assert exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED, exc
            outcomes.add("deadline")
        assert await count_rows(db, space) in (0, 500)
    assert "deadline" in outcomes, "no call hit its deadline: the test proved nothing"
