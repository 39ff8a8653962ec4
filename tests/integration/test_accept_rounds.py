"""AcceptBatch's rounds: what a batch answers when some of its keys meet a concurrent write.

Most groups settle in one statement, so one transaction. An event whose key
another transaction committed after the statement's snapshot goes to a next
round, a transaction of its own (store/accepts.py). What holds then: each
item's answer is true; a round run again after a serialization or deadlock
failure is that round alone, so an event an earlier round committed keeps
its ACCEPTED and its wake-up; and a call that fails after an earlier round
committed has committed those events: its retry finds them DUPLICATE.

The second round is made here, not waited for by chance: another transaction
inserts a key of the batch and commits only once the batch's statement waits
for it. A trigger on inbox_conflicts (this namespace only) fails that round
as a serialization failure would.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import grpc
import psycopg
import pytest
from psycopg import sql

from inboxd.serving.server import RunningServer
from inboxd.store.database import Database
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.harness import eventually
from tests.integration.helpers import accept_request, expect_status

ACCEPTED = inbox_pb2.ACCEPT_OUTCOME_ACCEPTED
DUPLICATE = inbox_pb2.ACCEPT_OUTCOME_DUPLICATE
CONFLICT = inbox_pb2.ACCEPT_OUTCOME_CONFLICT
NEW_TYPE = "rounds.new"
HELD_TYPE = "rounds.held"


@asynccontextmanager
async def commits_mid_statement(url: str, ns: str, key: str) -> AsyncIterator[None]:
    """Another transaction inserts `key`; it commits once an Accept's statement waits for that key.

    The Accept's statement took its snapshot before that commit: the key is
    neither inserted by it nor visible to it, so it goes to the next round.
    """
    async with await psycopg.AsyncConnection.connect(url) as conn:
        await conn.execute(
            "INSERT INTO inbox_events (namespace, event_key, event_type, payload, state, accepted_at, available_at,"
            " due_at, updated_at) VALUES (%s, %s, %s, '{\"v\": 1}', 'pending', now(), now(), now(), now())",
            (ns, key, HELD_TYPE),
        )
        yield

        async def accept_waits() -> bool:
            # pg_stat_activity is read once per transaction: clear the holder's snapshot each time.
            await conn.execute("SELECT pg_stat_clear_snapshot()")
            cur = await conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND query LIKE '-- inboxd: event_accept_many%'"
            )
            row = await cur.fetchone()
            return row is not None and row[0] > 0

        await eventually(accept_waits, "the Accept's statement waits for the held key", within=30.0)
        await conn.commit()


@asynccontextmanager
async def conflicting_copies_fail(db: Database, ns: str, times: int) -> AsyncIterator[None]:
    """The first `times` statements that keep a conflicting copy in `ns` fail with serialization_failure (40001).

    A sequence counts them: nextval is not rolled back with the statement.
    """
    name = f"test_rounds_{uuid.uuid4().hex[:12]}"
    ident = sql.Identifier(name)
    function = sql.SQL(
        "CREATE FUNCTION {ident}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        " IF nextval({seq}) <= {times} THEN"
        " RAISE EXCEPTION 'injected by the test' USING ERRCODE = 'serialization_failure'; END IF;"
        " RETURN NEW; END $$"
    ).format(ident=ident, seq=sql.Literal(name), times=sql.Literal(times))
    trigger = sql.SQL(
        "CREATE TRIGGER {ident} BEFORE INSERT ON inbox_conflicts FOR EACH ROW"
        " WHEN (NEW.namespace = {ns}) EXECUTE FUNCTION {ident}()"
    ).format(ident=ident, ns=sql.Literal(ns))

    async def install(conn: Any) -> None:
        await conn.execute(sql.SQL("CREATE SEQUENCE {ident}").format(ident=ident))
        await conn.execute(function)
        await conn.execute(trigger)

    async def remove(conn: Any) -> None:
        await conn.execute(sql.SQL("DROP TRIGGER IF EXISTS {ident} ON inbox_conflicts").format(ident=ident))
        await conn.execute(sql.SQL("DROP FUNCTION IF EXISTS {ident}()").format(ident=ident))
        await conn.execute(sql.SQL("DROP SEQUENCE IF EXISTS {ident}").format(ident=ident))

    await db.run(install)
    try:
        yield
    finally:
        await db.run(remove)


def woken_by(server: RunningServer, monkeypatch: pytest.MonkeyPatch) -> Counter[tuple[str, str]]:
    """Every wake-up the server's waiting Claims hear, summed per (namespace, event_type)."""
    woken: Counter[tuple[str, str]] = Counter()
    notify = server.inbox.bus.notify

    def record(namespace: str, event_type: str, count: int = 1, **handing_on: Any) -> int:
        if not handing_on.get("hops"):  # a waiter that looked in vain handing its wake-up on is no new one
            woken[namespace, event_type] += count
        return notify(namespace, event_type, count, **handing_on)

    monkeypatch.setattr(server.inbox.bus, "notify", record)
    return woken


def the_batch(ns: str) -> inbox_pb2.AcceptBatchRequest:
    """A new key, and the held key with another payload than the one the other transaction stores."""
    return inbox_pb2.AcceptBatchRequest(
        events=[
            accept_request(ns, "new", event_type=NEW_TYPE),
            accept_request(ns, "held", {"v": 2}, event_type=HELD_TYPE),
        ]
    )


async def conflicting_copies(db: Database, ns: str) -> list[Any]:
    async def work(conn: Any) -> list[Any]:
        cur = await conn.execute("SELECT inboxd_payload_json(c) FROM inbox_conflicts AS c WHERE namespace = %s", (ns,))
        return [row[0] for row in await cur.fetchall()]

    return await db.run(work)


async def test_a_round_run_again_after_a_serialization_failure_leaves_the_earlier_rounds_answers_and_wake_ups(
    inbox: InboxServiceStub,
    db: Database,
    server: RunningServer,
    migrated_url: str,
    ns: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    woken = woken_by(server, monkeypatch)
    async with conflicting_copies_fail(db, ns, times=1):
        async with commits_mid_statement(migrated_url, ns, "held"):
            call = asyncio.ensure_future(inbox.AcceptBatch(the_batch(ns)))
        answer = await call
    # Round 1 committed "new"; round 2 judged "held", failed once, and ran again alone.
    assert [r.outcome for r in answer.results] == [ACCEPTED, CONFLICT]
    assert woken[ns, NEW_TYPE] == 1, f"the new event's wake-up: {dict(woken)}"
    assert await conflicting_copies(db, ns) == [{"v": 2}]


async def test_a_batch_that_fails_after_an_earlier_round_committed_is_found_duplicate_by_its_retry(
    inbox: InboxServiceStub,
    db: Database,
    server: RunningServer,
    migrated_url: str,
    ns: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    woken = woken_by(server, monkeypatch)
    async with conflicting_copies_fail(db, ns, times=1000):
        async with commits_mid_statement(migrated_url, ns, "held"):
            call = asyncio.ensure_future(inbox.AcceptBatch(the_batch(ns)))
        failed = await expect_status(call, grpc.StatusCode.UNAVAILABLE)
        assert "serialization" in (failed.details() or ""), failed.details()
        # Round 1 committed "new" before round 2 failed: claimable, and its waiting Claims are told.
        assert woken[ns, NEW_TYPE] == 1, f"the committed event's wake-up: {dict(woken)}"
    again = await inbox.AcceptBatch(the_batch(ns))
    assert [r.outcome for r in again.results] == [DUPLICATE, CONFLICT]
