"""The lease rescuer in the database: bounded batches, one replica at a time (store/advisory.py).

Each batch is its own short single-statement transaction.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from inboxd.domain.vocabulary import EventState
from inboxd.store.advisory import alone
from inboxd.store.queries import QUERIES

# Any fixed number; it names "inboxd lease rescue" among the cluster's advisory locks.
RESCUE_LOCK = 7_311_003
BATCH_SIZE = 500


class Rescued(list[tuple[str, str, EventState]]):
    """(namespace, event_type, state after) of each rescued event, and the keyed ones that ended."""

    def __init__(self) -> None:
        super().__init__()
        # (namespace, event_key) of the keyed events dead-lettered: each freed its ordering key.
        self.freed_keys: list[tuple[str, str]] = []


async def rescue_expired_leases(
    conninfo: str,
    *,
    grace: timedelta,
    max_attempts: int,
    now: datetime | None = None,
    batch_size: int = BATCH_SIZE,
    namespace: str | None = None,
) -> Rescued | None:
    """Ends leases expired more than `grace` before `now`; None when another replica holds the lock.

    `namespace` confines the pass to one namespace; tests use it so that a
    far-future `now` touches only their own rows.
    """
    params: dict[str, Any] = {
        "now": now,
        "grace": grace,
        "max_attempts": max_attempts,
        "namespace": namespace,
        "batch_size": batch_size,
    }
    rescued = Rescued()
    async with alone(conninfo, RESCUE_LOCK, "lease rescue") as conn:
        if conn is None:
            return None
        while True:
            cur = await conn.execute(QUERIES["event_rescue_expired"], params)
            rows = await cur.fetchall()
            rescued.extend((str(ns), str(t), EventState(state)) for ns, t, state, _, _ in rows)
            rescued.freed_keys.extend(
                (str(ns), str(key)) for ns, _, state, key, ordering in rows if ordering and state != "pending"
            )
            if len(rows) < batch_size:
                break
    return rescued
