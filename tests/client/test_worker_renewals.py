"""A renewal that hangs costs a fraction of the lease: it times out early and is tried again at once.

Renewals are the unary path's (`use_streams=False`): on the Work stream the
server keeps the leases alive itself.

The hang is real: the test holds the event's row lock from a connection of
its own, so the server's RenewLease statement waits behind it; then it
cancels that statement (so the hung renewal never lands late) and lets go.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import psycopg
import pytest

from inboxd.store.database import Database
from inboxd_client import AsyncInboxClient, EventContext, Worker
from tests.client.helpers import accept, eventually, read_event, running

LEASE = 2.0


async def test_a_renewal_that_hangs_is_tried_again_at_once_and_the_lease_survives(
    client: AsyncInboxClient, db: Database, ns: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="inboxd_client.worker")
    started, finish = asyncio.Event(), asyncio.Event()

    async def handle(ctx: EventContext) -> None:
        started.set()
        await finish.wait()

    await accept(client, ns, "k")
    worker = Worker(client, handle, namespaces=[ns], lease=LEASE, wait=1.0, use_streams=False)
    async with running(worker):
        await asyncio.wait_for(started.wait(), 10)
        claimed = await read_event(db, ns, "k")
        async with await psycopg.AsyncConnection.connect(db.conninfo, autocommit=True) as hold:
            async with hold.transaction():
                await hold.execute(
                    "SELECT 1 FROM inbox_events WHERE namespace = %s AND event_key = 'k' FOR UPDATE", (ns,)
                )
                await eventually(lambda: _renewal_failed(caplog, ns), "a renewal timed out behind the lock")
                # The server cancels a renewal's statement once its deadline has
                # passed; one still waiting would land later and extend the
                # lease on its own, so any left is cancelled.
                await hold.execute(
                    "SELECT pg_cancel_backend(pid) FROM pg_stat_activity"
                    " WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid))"
                )
                # Asked while the lock is still held: once it is released, the retry in flight may land at once.
                assert worker.stats.renewals == 0
        await eventually(lambda: worker.stats.renewals >= 1, "a renewal got through once the lock was gone")
        renewed = await read_event(db, ns, "k")
        finish.set()
        await eventually(lambda: worker.stats.completed == 1, "the event completed")
    # The renewal that got through was made before the lease it extended had ended.
    made_at = renewed["lease_expires_at"] - timedelta(seconds=LEASE)
    late = made_at - claimed["lease_expires_at"]
    assert made_at < claimed["lease_expires_at"], f"renewed {late} after the lease ended"
    assert worker.stats.superseded == 0
    row = await read_event(db, ns, "k")
    assert (row["state"], row["attempt"]) == ("completed", 1)


def _renewal_failed(caplog: pytest.LogCaptureFixture, ns: str) -> bool:
    return any(f"renewing the lease of {ns}/k failed" in r.getMessage() for r in caplog.records)


def test_a_renewal_deadline_is_a_fraction_of_the_interval_between_renewals() -> None:
    from inboxd_client.renewals import renewal_deadline, renewal_interval

    for lease in (1.0, 2.0, 30.0, 3600.0):
        assert renewal_interval(lease) == lease / 3
        assert 0 < renewal_deadline(lease) <= renewal_interval(lease) / 2
    assert renewal_deadline(30.0) == 2.5
    assert renewal_deadline(2.0) == 0.25  # a short lease's floor
