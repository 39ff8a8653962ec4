"""Accept's group commit: one statement and one transaction per group, and one caller's refusal is its own."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import grpc
import pytest

from inboxd.domain import validation
from inboxd.store.database import Database
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.integration.helpers import accept_request, captured_logs, expect_status

ACCEPTED = inbox_pb2.ACCEPT_OUTCOME_ACCEPTED
DUPLICATE = inbox_pb2.ACCEPT_OUTCOME_DUPLICATE
CONFLICT = inbox_pb2.ACCEPT_OUTCOME_CONFLICT
# Valid JSON that jsonb refuses: only a validator gap would let it reach PostgreSQL.
NUL_PAYLOAD = b'{"a": "\\u0000"}'


async def writers(db: Database, ns: str) -> set[str]:
    """The transactions (xmin) that wrote this namespace's events and conflicting copies."""

    async def work(conn: Any) -> set[str]:
        cur = await conn.execute(
            "SELECT xmin::text FROM inbox_events WHERE namespace = %s"
            " UNION SELECT xmin::text FROM inbox_conflicts WHERE namespace = %s",
            (ns, ns),
        )
        return {row[0] for row in await cur.fetchall()}

    return await db.run(work)


async def test_a_batch_with_new_keys_repeats_and_conflicts_is_one_transaction(
    inbox: InboxServiceStub, db: Database, ns: str
) -> None:
    await inbox.Accept(accept_request(ns, "old", {"v": 1}))
    before = await writers(db, ns)
    batch = inbox_pb2.AcceptBatchRequest(
        events=[
            accept_request(ns, "new-1"),
            accept_request(ns, "old", {"v": 2}),  # conflicts with the stored row
            accept_request(ns, "new-2", {"v": 1}),
            accept_request(ns, "new-2", {"v": 3}),  # conflicts with the copy that won in this batch
            accept_request(ns, "old", {"v": 1}),
        ]
    )
    answer = await inbox.AcceptBatch(batch)
    assert [r.outcome for r in answer.results] == [ACCEPTED, CONFLICT, ACCEPTED, CONFLICT, DUPLICATE]
    written = await writers(db, ns) - before
    assert len(written) == 1, f"the batch's rows and conflicting copies came from {len(written)} transactions"


async def test_a_value_postgresql_refuses_names_its_event_and_spares_the_neighbours(
    inbox: InboxServiceStub, db: Database, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # PostgreSQL parses a JSON payload only to judge a repeat whose bytes
    # differ; open a gap in validation so that such a parse refuses one.
    await inbox.Accept(accept_request(ns, "b1"))
    monkeypatch.setattr(validation, "check_payload", lambda field, payload, limit, is_json: None)
    bad_batch = inbox_pb2.AcceptBatchRequest(
        events=[accept_request(ns, "b0"), accept_request(ns, "b1", NUL_PAYLOAD), accept_request(ns, "b2")]
    )
    neighbours = [inbox.Accept(accept_request(ns, f"good-{i}")) for i in range(30)]
    answers = await asyncio.gather(inbox.AcceptBatch(bad_batch), *neighbours, return_exceptions=True)
    refused, *others = answers
    assert isinstance(refused, grpc.aio.AioRpcError)
    assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT
    # Refused by PostgreSQL, named by its event: never INTERNAL.
    assert (refused.details() or "").startswith("events[1].payload: PostgreSQL refused it: "), refused.details()
    assert all(isinstance(a, inbox_pb2.AcceptResponse) and a.outcome == ACCEPTED for a in others), others

    async def keys(conn: Any) -> set[str]:
        cur = await conn.execute("SELECT event_key FROM inbox_events WHERE namespace = %s", (ns,))
        return {row[0] for row in await cur.fetchall()}

    assert await db.run(keys) == {"b1"} | {f"good-{i}" for i in range(30)}
    single = await expect_status(inbox.Accept(accept_request(ns, "b1", NUL_PAYLOAD)), grpc.StatusCode.INVALID_ARGUMENT)
    assert (single.details() or "").startswith("payload: PostgreSQL refused it: "), single.details()


async def test_at_info_the_log_has_no_line_per_event_or_per_group(inbox: InboxServiceStub, ns: str) -> None:
    with captured_logs(logging.INFO) as out:
        await inbox.AcceptBatch(inbox_pb2.AcceptBatchRequest(events=[accept_request(ns, f"k{i}") for i in range(50)]))
        for i in range(20):
            await inbox.Accept(accept_request(ns, f"k{i}"))
        claimed = await inbox.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], max_events=10))
        for event in claimed.events:
            await inbox.Complete(
                inbox_pb2.CompleteRequest(namespace=ns, event_key=event.event_key, claim_token=event.claim_token)
            )
    messages = [json.loads(line)["msg"] for line in out.getvalue().splitlines()]
    assert len(claimed.events) == 10
    for per_event in ("accept accepted", "accept duplicate", "accept group", "event claimed", "event completed"):
        assert per_event not in messages, f"a {per_event!r} line at INFO"


async def test_accept_probes_stored_rows_by_key_under_a_generic_plan(db: Database, ns: str) -> None:
    """unnest is estimated at 100 rows whatever it holds; a generic plan once hashed a full scan."""
    from inboxd.store.queries import numbered

    statement, names = numbered("event_accept_many")
    types = {
        "namespaces": "text[]",
        "event_keys": "text[]",
        "event_types": "text[]",
        "payloads": "bytea[]",
        "extras": "text",
        "now": "timestamptz",
    }
    values = {
        "namespaces": "ARRAY[{namespace}]",
        "event_keys": "ARRAY['k']",
        "event_types": "ARRAY['t']",
        "payloads": "ARRAY['{{}}'::bytea]",
        "extras": "'[]'",
        "now": "NULL",
    }

    async def plan(conn: Any) -> str:
        # A few thousand stored rows the planner knows of: enough to make a hash
        # join over a full scan look cheaper than 100 probes, as it did.
        await conn.execute(
            "INSERT INTO inbox_events (namespace, event_key, event_type, payload, state, accepted_at, available_at,"
            " due_at, updated_at) SELECT %s, 'bulk-' || g, 't', '{}', 'pending', now(), now(), now(), now()"
            " FROM generate_series(1, 3000) AS g",
            (ns,),
        )
        await conn.execute("ANALYZE inbox_events")
        async with conn.transaction(force_rollback=True):
            await conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            await conn.execute(f"PREPARE accept_plan({', '.join(types[n] for n in names)}) AS " + statement)
            try:
                arguments = ", ".join(values[n] for n in names).format(namespace=f"'{ns}'")
                cur = await conn.execute(f"EXPLAIN EXECUTE accept_plan({arguments})")
                return "\n".join(row[0] for row in await cur.fetchall())
            finally:
                await conn.execute("DEALLOCATE accept_plan")

    text = await db.run(plan, transaction=False)
    assert "Seq Scan on inbox_events" not in text, text
