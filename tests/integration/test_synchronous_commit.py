"""A COMMIT that the synchronous standby never confirmed is not acknowledged.

With a synchronous standby, PostgreSQL holds each COMMIT until the standby
has its WAL. A COMMIT held there and then cancelled (an operator's
pg_cancel_backend, a pooler's cancel) is committed on the primary only: the
client gets a WARNING and success. If the primary dies before the standby
catches up, the promoted standby never had it. inboxd must answer such a call
UNAVAILABLE, never OK; the caller's retry then finds the event (Accept is
idempotent), so nothing is lost either.
"""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from inboxd_client import AcceptOutcome, Unavailable
from tests.harness import eventually
from tests.reliability.replication import cut_off_standby, held_commits, replicated_pair, wal_sender
from tests.reliability.rig import client, query, serving

NS = "sync/cancelled"


async def test_a_commit_cancelled_while_the_standby_has_not_confirmed_it_is_not_acknowledged() -> None:
    async with replicated_pair(synchronous=True) as pair, serving(pair.url) as server:
        async with client(server.target) as inbox:
            first = await inbox.accept(NS, "confirmed", "order.shipped", {"n": 1})
            assert first.outcome == AcceptOutcome.ACCEPT_OUTCOME_ACCEPTED
            sender = await wal_sender(pair.primary)
            cut_off_standby(sender)
            try:
                held = asyncio.create_task(inbox.accept(NS, "held", "order.shipped", {"n": 2}))

                async def commit_held() -> bool:
                    return await held_commits(pair.primary) >= 1

                await eventually(commit_held, "the Accept's COMMIT waits for the standby", within=30.0)
                await query(
                    pair.primary.conninfo,
                    "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'",
                )
                with pytest.raises(Unavailable, match="standby"):
                    await held
            finally:
                os.kill(sender, signal.SIGCONT)
            # Committed on the primary after all: the caller's retry is told it is a duplicate.
            again = await inbox.accept(NS, "held", "order.shipped", {"n": 2})
            assert again.outcome == AcceptOutcome.ACCEPT_OUTCOME_DUPLICATE
