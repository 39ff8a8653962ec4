"""A Claim that found a limited namespace's lock taken: it waits for the holder's commit and looks again.

Claims of a namespace with a max_in_flight take turns on its advisory lock
to count its slots (inboxd_flow_room, migration 0027); one that finds the
lock taken takes none of the namespace rather than wait inside its
statement (two Claims over the same limited namespaces in different orders
would deadlock). When that leaves it with nothing, nothing else would wake
it when the holder commits: the slots and events left would wait for the
fallback poll, or, for a Claim that does not wait, go unclaimed. So the
Claim waits for the lock here, holding no other, and claims again holding it.
"""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta

import psycopg.errors

from inboxd.domain.vocabulary import ClaimBatch, ClaimRequest
from inboxd.store.claims import claim_events
from inboxd.store.database import Connection
from inboxd.store.queries import QUERIES


async def claim_events_when_free(
    conn: Connection,
    request: ClaimRequest,
    namespace: str,
    *,
    lock_wait: timedelta,
    max_attempts: int,
    max_bytes: int,
    now: datetime | None = None,
    ignore_stale: bool = True,
    after: str = "",
) -> ClaimBatch:
    """claim_events, after waiting up to `lock_wait` for the Claim that holds `namespace`'s lock to commit.

    For a Claim whose look found that namespace `busy` (another Claim was
    counting its slots) and claimed nothing: one transaction that takes the
    lock, waiting for the holder, then claims holding it. If the lock is not
    free within `lock_wait`, it claims without it, as a first look would.
    """
    milliseconds = max(1, round(lock_wait.total_seconds() * 1000))
    async with conn.transaction():
        cur = await conn.execute(QUERIES["claim_lock_timeout"], {"lock_timeout": f"{milliseconds}ms"})
        previous = await cur.fetchone()
        assert previous is not None
        with contextlib.suppress(psycopg.errors.LockNotAvailable):
            # A savepoint: a lock timeout ends it alone, and the claim below still runs.
            async with conn.transaction():
                await conn.execute(QUERIES["claim_wait_for_namespace"], {"namespace": namespace})
        await conn.execute(QUERIES["claim_lock_timeout"], {"lock_timeout": previous[0]})
        return await claim_events(
            conn, request, max_attempts=max_attempts, max_bytes=max_bytes, now=now, ignore_stale=ignore_stale,
            after=after,
        )  # fmt: skip
