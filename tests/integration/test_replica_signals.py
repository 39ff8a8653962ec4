"""Signals between replicas: sent only when another replica listens, and no payload can silence them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import psycopg
import pytest

from inboxd.store.notifications import CHANNEL, ReplicaSignals
from tests.harness import eventually
from tests.integration.helpers import own_database as shared_own_database

Heard = list[list[tuple[str, str, int]] | None]


@pytest.fixture
async def quiet_database(database_url: str) -> AsyncIterator[str]:
    """A database of this test's own: the other tests' servers listen on theirs, so here nobody else does."""
    async with shared_own_database(database_url, migrated=False, prefix="signals") as url:
        yield url


async def test_a_malformed_notification_does_not_end_cross_replica_wakeups(migrated_url: str) -> None:
    heard: Heard = []
    signals = ReplicaSignals(migrated_url, heard.append)
    signals.start()
    try:
        # On (re)connecting the listener tells everyone to look again: it is listening now.
        await eventually(lambda: None in heard, "the listener to start")
        bad = ["[]", "null", '"x"', "not json", '{"e": 5}', '{"e": [[1, 2]]}', '{"e": [["ns", "t", true]]}', "{}"]
        good = json.dumps({"r": "another-replica", "e": [["ns", "t", 2]]})
        async with await psycopg.AsyncConnection.connect(migrated_url, autocommit=True) as conn:
            for payload in [*bad, good]:
                await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload))
        await eventually(lambda: [("ns", "t", 2)] in heard, lambda: f"the good signal after the bad: {heard}")
    finally:
        await signals.stop()


async def test_a_replica_signals_another_and_stays_quiet_alone(quiet_database: str) -> None:
    lone_heard: Heard = []
    lone = ReplicaSignals(quiet_database, lone_heard.append)
    lone.start()
    try:
        await eventually(lambda: None in lone_heard, "the replica to listen")
        lone.publish({("ns-alone", "t"): 1})
        await eventually(lambda: lone.skipped == 1, "the lone replica to drop its signal")
        assert lone.sent == 0

        heard: Heard = []
        other = ReplicaSignals(quiet_database, heard.append)
        other.start()
        try:
            await eventually(lambda: None in heard, "the second replica to listen")
            lone._peers_checked_at = float("-inf")  # skip the seconds it trusts its last look
            lone.publish({("ns-pair", "t"): 3})
            await eventually(lambda: [("ns-pair", "t", 3)] in heard, "the second replica to hear the first")
            assert lone.sent == 1
        finally:
            await other.stop()
    finally:
        await lone.stop()
