"""Subscriptions' rows: create, read, list and delete one, each change with its audit row; which accept to run.

The fan-out itself is not here: the accept statement inserts the copies
(event_accept_fanned in queries/accepts.sql) in the Accept's own
transaction. FanOutMode is this process's belief about which of the two
accept statements to run; a wrong belief costs time, never a copy.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from inboxd.domain.errors import AlreadyExists, NotFound
from inboxd.domain.namespace_patterns import grant_to_like
from inboxd.domain.subscriptions import Subscription, SubscriptionChange, SubscriptionSpec, describe
from inboxd.store.database import Connection
from inboxd.store.queries import QUERIES

RECENT_CHANGES = 20
# How long the fanned accept statement runs after the lean one found a
# subscription, before the lean one is tried again (a subscription deleted
# on another replica is learnt this way; one refused round trip a period).
RECHECK_SECONDS = 10.0


class FanOutMode:
    """Which accept statement to run: the lean one until a subscription is met, then the fanned one for a while.

    The lean statement refuses (does nothing, answers no row) while any
    subscription stands, so believing "none" wrongly costs one round trip;
    believing "some" wrongly costs the fanned statement's setup.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._fanned_until = float("-inf")

    @property
    def fanned(self) -> bool:
        return self._clock() < self._fanned_until

    def subscriptions_seen(self) -> None:
        """The lean statement refused: a subscription stands."""
        self._fanned_until = self._clock() + RECHECK_SECONDS

    def look_again(self) -> None:
        """A subscription was deleted here: try the lean statement at the next accept."""
        self._fanned_until = float("-inf")


def _subscription(row: Sequence[Any]) -> Subscription:
    name, pattern, event_types, created_at, created_by = row
    return Subscription(str(name), str(pattern), tuple(event_types), created_at, str(created_by))


async def find(conn: Connection, name: str) -> Subscription | None:
    cur = await conn.execute(QUERIES["subscription_read"], {"name": name})
    row = await cur.fetchone()
    return None if row is None else _subscription(row)


async def list_all(conn: Connection) -> list[Subscription]:
    cur = await conn.execute(QUERIES["subscription_list"])
    return [_subscription(row) for row in await cur.fetchall()]


async def create(
    conn: Connection, spec: SubscriptionSpec, *, actor: str, reason: str, now: datetime | None = None
) -> tuple[Subscription, bool]:
    """Creates the subscription, audited; answers it and whether it is new.

    The same name asked for again with the same definition answers the
    stored one (a retried create); with another, AlreadyExists.
    """
    await conn.execute(QUERIES["subscription_lock"], {"name": spec.name})
    existing = await find(conn, spec.name)
    if existing is not None:
        if existing.same_definition(spec):
            return existing, False
        raise AlreadyExists(
            f"subscription {spec.name!r} exists with {describe(existing.namespace_pattern, existing.event_types)}:"
            " delete it first to change it"
        )
    params = {
        "name": spec.name,
        "namespace_pattern": spec.namespace_pattern,
        "like_pattern": grant_to_like(spec.namespace_pattern),
        "event_types": list(spec.event_types),
        "actor": actor,
        "reason": reason,
        "after": describe(spec.namespace_pattern, spec.event_types),
        "now": now,
    }
    cur = await conn.execute(QUERIES["subscription_insert"], params)
    row = await cur.fetchone()
    assert row is not None, "an INSERT without a conflict answers its row"
    return _subscription(row), True


async def delete(conn: Connection, name: str, *, actor: str, reason: str, now: datetime | None = None) -> Subscription:
    """Deletes the subscription, audited; answers it as it was. NotFound when there is none."""
    await conn.execute(QUERIES["subscription_lock"], {"name": name})
    existing = await find(conn, name)
    if existing is None:
        raise NotFound(f"no subscription {name!r}")
    params = {
        "name": name,
        "actor": actor,
        "reason": reason,
        "before": describe(existing.namespace_pattern, existing.event_types),
        "now": now,
    }
    cur = await conn.execute(QUERIES["subscription_delete"], params)
    row = await cur.fetchone()
    assert row is not None, "the row was read under the name's lock"
    return _subscription(row)


async def recent_changes(conn: Connection, name: str, limit: int = RECENT_CHANGES) -> list[SubscriptionChange]:
    """The name's audited changes, newest first."""
    cur = await conn.execute(QUERIES["subscription_changes_recent"], {"name": name, "limit": limit})
    return [
        SubscriptionChange(str(n), str(actor), str(reason), changed_at, str(before), str(after))
        for n, actor, reason, changed_at, before, after in await cur.fetchall()
    ]
