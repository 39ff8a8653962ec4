"""A replica's signals reach the others from its first second: waiting Claims elsewhere skip
their own looks on the strength of them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from inboxd.store.notifications import ReplicaSignals
from tests.harness import eventually
from tests.integration.helpers import own_database as shared_own_database

Heard = list[list[tuple[str, str, int]] | None]


@pytest.fixture
async def own_database(database_url: str) -> AsyncIterator[str]:
    """A database of this test's own: the other tests' servers listen on theirs, so here nobody else does."""
    async with shared_own_database(database_url, migrated=False, prefix="signals") as url:
        yield url


async def test_a_replica_whose_own_listener_is_not_yet_connected_signals_the_one_that_listens(
    own_database: str,
) -> None:
    heard: Heard = []
    listening = ReplicaSignals(own_database, heard.append)
    listening.start()
    starting = ReplicaSignals(own_database, lambda _: None)
    try:
        await eventually(lambda: listening.listening, "the first replica to listen")
        # Only the sender runs: the one listener there is is the other replica's, not this one's own.
        starting._tasks = [asyncio.create_task(starting._send())]
        starting.publish({("ns", "t"): 1})
        await eventually(lambda: starting.sent + starting.skipped == 1, "the signal to be sent or dropped")
        assert starting.sent == 1, "a replica took the other replica's listener for its own and stayed quiet"
        await eventually(lambda: [("ns", "t", 1)] in heard, lambda: f"the other replica to hear it: {heard}")
    finally:
        await starting.stop()
        await listening.stop()
