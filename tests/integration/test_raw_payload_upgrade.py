"""The upgrade to raw payloads (migrations 0019 and 0020) keeps every row a database of 0018 holds.

A database is migrated to 0018 only, the schema today's main leaves, and given
events as main's Accept, Claim, retention and conflicts wrote them (payloads in
jsonb) in every state; then it is upgraded and served, and each old row must
claim, complete, replay, judge its repeats and read back as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import grpc
import psycopg
import pytest

from inboxd.config.settings import Settings
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd.store.migrate import _statements, available_migrations, migrate
from inboxd.store.retention import apply_retention
from inboxd_client.v1 import admin_pb2, inbox_pb2
from inboxd_client.v1.admin_pb2_grpc import InboxAdminServiceStub
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import NO_RESCUER
from tests.integration.helpers import own_database

NS = "old/inbox"
# jsonb's rendering of the payload every old row was given: what was ever kept of it.
RENDERED = '{"a": "é", "b": [1, 2]}'.encode()

# Rows as main wrote them: the payload in jsonb, no raw_payload or content_type columns yet.
OLD_ROWS = """
INSERT INTO inbox_events (namespace, event_key, event_type, payload, state, attempt, accepted_at, available_at,
                          due_at, updated_at, claim_token, fencing_token, lease_expires_at, worker_id,
                          completed_at, disposition, last_error)
VALUES
  (%(ns)s, 'pending', 't', %(p)s, 'pending', 0, now(), now(), now(), now(), NULL, NULL, NULL, NULL, NULL, NULL, NULL),
  (%(ns)s, 'processing', 't', %(p)s, 'processing', 1, now(), now(), now() + interval '1 hour', now(), 'tok-1', 1,
   now() + interval '1 hour', 'w', NULL, NULL, NULL),
  (%(ns)s, 'completed', 't', %(p)s, 'completed', 1, now(), now(), NULL, now(), NULL, 2, NULL, NULL,
   now() - interval '2 days', 'applied', NULL),
  (%(ns)s, 'dropped', 't', NULL, 'completed', 1, now(), now(), NULL, now(), NULL, 3, NULL, NULL,
   now() - interval '2 days', 'applied', NULL),
  (%(ns)s, 'dead', 't', %(p)s, 'dead_lettered', 10, now(), now(), NULL, now(), NULL, 4, NULL, NULL, NULL, NULL,
   'attempts exhausted')
"""
OLD_CLAIMS = """
INSERT INTO inbox_claims (fencing_token, namespace, event_key, claim_token, worker_id, attempt, claimed_at)
VALUES (1, %(ns)s, 'processing', 'tok-1', 'w', 1, now())
"""
OLD_CONFLICT = """
INSERT INTO inbox_conflicts (namespace, event_key, event_type, payload, metadata, received_at, payload_sha256,
                             payload_bytes)
VALUES (%(ns)s, 'pending', 't', '{"a": 2}', '{}', now(), sha256(convert_to('{"a": 2}', 'UTF8')), 8)
"""


@pytest.fixture(scope="module")
async def upgraded(database_url: str) -> AsyncIterator[str]:
    async with own_database(database_url, migrated=False, prefix="upgrade") as url:
        assert (await migrate(url, up_to=18))[-1] == "0018_trends.sql"
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute("SELECT setval('inbox_fencing_tokens', 10)")
            for statement in (OLD_ROWS, OLD_CLAIMS, OLD_CONFLICT):
                await conn.execute(statement, {"ns": NS, "p": '{"b": [1,2],   "a": "\\u00e9"}'})
        assert (await migrate(url))[:2] == ["0019_raw_payloads.sql", "0020_raw_payloads_online.sql"]
        yield url


@pytest.fixture(scope="module")
async def server(upgraded: str) -> AsyncIterator[RunningServer]:
    db = Database(upgraded, max_size=4)
    await db.open()
    running = await start_server(Settings(listen="127.0.0.1:0", rescue_interval=NO_RESCUER), db)
    yield running
    await running.stop(1.0)
    await db.close()


@pytest.fixture(scope="module")
async def stubs(server: RunningServer) -> AsyncIterator[tuple[InboxServiceStub, InboxAdminServiceStub]]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as chan:
        yield InboxServiceStub(chan), InboxAdminServiceStub(chan)


async def get(admin: InboxAdminServiceStub, key: str) -> admin_pb2.Event:
    asked = admin_pb2.GetEventRequest(namespace=NS, event_key=key, include_conflict_payloads=True)
    event: admin_pb2.Event = (await admin.GetEvent(asked)).event
    return event


async def sql(url: str, query: Any, *params: object) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        return await (await conn.execute(query, params)).fetchall()


async def test_old_rows_read_back_as_json_with_their_copies_in_every_state(
    stubs: tuple[InboxServiceStub, InboxAdminServiceStub],
) -> None:
    _, admin = stubs
    for key in ("pending", "processing", "completed", "dead"):
        event = await get(admin, key)
        assert (event.payload, event.content_type) == (RENDERED, "application/json"), key
    assert (await get(admin, "dropped")).payload == b""
    [copy] = (await get(admin, "pending")).conflicts
    assert (copy.payload, copy.content_type, copy.payload_size) == (b'{"a": 2}', "application/json", 8)


async def test_old_rows_claim_complete_and_replay_as_before(
    stubs: tuple[InboxServiceStub, InboxAdminServiceStub],
) -> None:
    inbox, admin = stubs
    # The claim taken before the upgrade still fences, and completes.
    await inbox.Complete(inbox_pb2.CompleteRequest(namespace=NS, event_key="processing", claim_token="tok-1"))
    await admin.Replay(admin_pb2.ReplayRequest(namespace=NS, event_key="dead", reason="upgrade test"))
    claimed = await inbox.Claim(inbox_pb2.ClaimRequest(namespaces=[NS], max_events=10))
    assert sorted((e.event_key, e.payload, e.content_type) for e in claimed.events) == [
        ("dead", RENDERED, "application/json"),
        ("pending", RENDERED, "application/json"),
    ]
    for event in claimed.events:
        await inbox.Complete(
            inbox_pb2.CompleteRequest(namespace=NS, event_key=event.event_key, claim_token=event.claim_token)
        )


async def test_repeats_of_old_rows_are_judged_as_json_values(
    stubs: tuple[InboxServiceStub, InboxAdminServiceStub],
) -> None:
    inbox, _ = stubs

    async def outcome(key: str, body: bytes, content_type: str = "") -> int:
        request = inbox_pb2.AcceptRequest(
            namespace=NS, event_key=key, event_type="t", payload=body, content_type=content_type
        )
        return int((await inbox.Accept(request)).outcome)

    assert await outcome("completed", b'{"a":"\\u00e9","b":[1,2]}') == inbox_pb2.ACCEPT_OUTCOME_DUPLICATE
    assert await outcome("completed", b'{"a": "e", "b": [1, 2]}') == inbox_pb2.ACCEPT_OUTCOME_CONFLICT
    assert await outcome("completed", RENDERED, "text/plain") == inbox_pb2.ACCEPT_OUTCOME_DUPLICATE
    assert await outcome("dropped", b"anything=1", "application/x-www-form-urlencoded") == (
        inbox_pb2.ACCEPT_OUTCOME_DUPLICATE
    )


async def test_the_upgrade_leaves_a_valid_check_retentions_new_index_and_sql_users_functions(
    upgraded: str, stubs: tuple[InboxServiceStub, InboxAdminServiceStub]
) -> None:
    _, admin = stubs
    [(validated,)] = await sql(
        upgraded, "SELECT convalidated FROM pg_constraint WHERE conname = 'inbox_events_payload_kept_until_completed'"
    )
    assert validated
    indexes = await sql(
        upgraded,
        "SELECT c.relname, i.indisvalid FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid"
        " WHERE c.relname LIKE 'inbox_events_payload_%%'",
    )
    assert indexes == [("inbox_events_payload_kept", True)]
    [(as_json,)] = await sql(
        upgraded, "SELECT inboxd_payload_json(e) FROM inbox_events AS e WHERE namespace = %s AND event_key = 'dead'", NS
    )
    assert as_json == {"a": "é", "b": [1, 2]}
    # Retention drops an old row's jsonb payload, as it drops a new row's bytes.
    counts = await apply_retention(
        upgraded, retention=timedelta(days=30), payload_retention=timedelta(days=1), namespace=NS
    )
    assert counts is not None and counts.payloads_dropped >= 1
    assert (await get(admin, "completed")).payload == b""


async def test_the_online_step_runs_again_from_the_top_after_a_start_cut_short(upgraded: str) -> None:
    """0020 runs outside a transaction: a start cut short begins it again, and every statement takes that."""
    [(_, _, script)] = [m for m in available_migrations() if m[0] == 20]
    statements = _statements(script)
    assert [s.split()[0:3] for s in statements] == [
        ["DROP", "INDEX", "CONCURRENTLY"],
        ["CREATE", "INDEX", "CONCURRENTLY"],
        ["DROP", "INDEX", "CONCURRENTLY"],
        ["ALTER", "TABLE", "inbox_events"],
    ]
    async with await psycopg.AsyncConnection.connect(upgraded, autocommit=True) as conn:
        for statement in statements:
            await conn.execute(statement)
    indexes = await sql(
        upgraded,
        "SELECT c.relname, i.indisvalid FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid"
        " WHERE c.relname LIKE 'inbox_events_payload_%%'",
    )
    assert indexes == [("inbox_events_payload_kept", True)]


async def test_replicas_starting_together_take_turns_through_the_online_step(database_url: str) -> None:
    """One applies every migration, the other finds nothing to do; neither deadlocks on the concurrent index build.

    (A replica waiting in pg_advisory_lock would hold a snapshot that CREATE
    INDEX CONCURRENTLY waits for, while holding up the lock's holder.)
    """
    async with own_database(database_url, migrated=False, prefix="turns") as url:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await migrate(url, up_to=19)
            # A row, so the build has a table to read while the other replica waits.
            await conn.execute(OLD_ROWS, {"ns": NS, "p": "{}"})
        first, second = await asyncio.wait_for(
            asyncio.gather(migrate(url, up_to=20), migrate(url, up_to=20)), timeout=60
        )
        assert sorted([first, second]) == [[], ["0020_raw_payloads_online.sql"]]
