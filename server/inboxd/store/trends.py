"""The console's trends in the database: each process's minute tally, the recorded ages, the kept window.

A process writes its tally in one statement (`record_counts`); rows are
summed across processes and replicas on read. The ages and the forgetting
run on one replica at a time, under an advisory lock (store/advisory.py).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta

from inboxd.domain.trends import MinuteCounts, NamespaceTrend, minutes_of
from inboxd.store.advisory import alone
from inboxd.store.database import Connection
from inboxd.store.queries import QUERIES

# Any fixed number; it names "inboxd trends" among the cluster's advisory locks.
TRENDS_LOCK = 7_311_017


async def record_counts(conn: Connection, counts: Sequence[MinuteCounts], *, now: datetime | None) -> None:
    """One process's tally, every namespace in one INSERT, stamped with the minute of `now`."""
    document = json.dumps(
        [
            {
                "namespace": c.namespace,
                "accepted": c.accepted,
                "completed": c.completed,
                "dead_lettered": c.dead_lettered,
            }
            for c in counts
        ]
    )
    await conn.execute(QUERIES["trend_counts_record"], {"counts": document, "now": now})


async def record_ages_alone(
    conninfo: str,
    read_ages: Callable[[], Awaitable[Sequence[tuple[str, float]]]],
    *,
    window: timedelta,
    now: datetime | None,
) -> bool:
    """Records each namespace's oldest-claimable age for this minute and forgets what fell out of the window.

    False when another replica holds the lock (it does this minute's work).
    `read_ages` runs only under the lock: the Stats query it reads is a scan.
    """
    async with alone(conninfo, TRENDS_LOCK, "trends") as conn:
        if conn is None:
            return False
        ages = await read_ages()
        document = json.dumps([{"namespace": ns, "seconds": seconds} for ns, seconds in ages])
        params = {"ages": document, "now": now, "window": window}
        await conn.execute(QUERIES["trend_ages_record"], params)
        await conn.execute(QUERIES["trend_counts_forget"], params)
        await conn.execute(QUERIES["trend_ages_forget"], params)
    return True


async def read_trends(
    conn: Connection, namespaces: Sequence[str], *, window: timedelta, now: datetime | None
) -> list[NamespaceTrend]:
    """The window's series of each namespace asked for, one point a minute, in the order asked."""
    params = {"namespaces": list(namespaces), "window": window, "now": now}
    end_cur = await conn.execute(QUERIES["trend_now"], params)
    end_row = await end_cur.fetchone()
    assert end_row is not None
    minutes = minutes_of(end_row[0], window)
    counts: dict[tuple[str, datetime], tuple[int, int, int]] = {}
    for ns, minute, accepted, completed, dead in await (
        await conn.execute(QUERIES["trend_counts_read"], params)
    ).fetchall():
        counts[(ns, minute)] = (int(accepted), int(completed), int(dead))
    ages: dict[tuple[str, datetime], float] = {}
    for ns, minute, seconds in await (await conn.execute(QUERIES["trend_ages_read"], params)).fetchall():
        ages[(ns, minute)] = float(seconds)
    trends = []
    for ns in namespaces:
        each = [counts.get((ns, m), (0, 0, 0)) for m in minutes]
        trends.append(
            NamespaceTrend(
                namespace=ns,
                minutes=minutes,
                accepted=tuple(c[0] for c in each),
                completed=tuple(c[1] for c in each),
                dead_lettered=tuple(c[2] for c in each),
                oldest_claimable=tuple(ages.get((ns, m)) for m in minutes),
            )
        )
    return trends
