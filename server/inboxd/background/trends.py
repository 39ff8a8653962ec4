"""The periodic writers of the console's trends: each process's minute tally, and one replica's ages.

Every server process writes what its `TrendTally` counted once a minute, in
one statement, and nothing when it counted nothing (an idle process costs
the database nothing). Once a minute one replica at a time (an advisory
lock) records each namespace's oldest-claimable age from the Stats query and
forgets the minutes older than the kept window (TRENDS_WINDOW).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from inboxd.domain.errors import Unavailable
from inboxd.domain.trends import TRENDS_WINDOW
from inboxd.observability.trends import TrendTally
from inboxd.store.trends import record_ages_alone, record_counts
from inboxd.usecases.admin import Operators
from inboxd.usecases.inbox import Inbox

log = logging.getLogger(__name__)

TRENDS_INTERVAL_SECONDS = 60.0


async def write_tally(inbox: Inbox, tally: TrendTally) -> bool:
    """Stores what `tally` counted since the last write, as of the inbox's clock; False when it counted nothing.

    Counts a failed write could not store go back into the tally, for the next minute's write.
    """
    counts = tally.take()
    if not counts:
        return False
    now = inbox.clock()
    try:
        await inbox.db.run(lambda conn: record_counts(conn, counts, now=now), transaction=False)
    except BaseException:
        tally.give_back(counts)
        raise
    return True


async def record_ages(operators: Operators, *, window: timedelta = TRENDS_WINDOW) -> bool:
    """This minute's oldest-claimable ages and the window's forgetting; False when another replica does it."""
    inbox = operators.inbox
    cap = inbox.settings.metrics_max_namespaces

    async def read_ages() -> list[tuple[str, float]]:
        ages = [
            (s.namespace, s.oldest_claimable_age.total_seconds() if s.oldest_claimable_age is not None else 0.0)
            for s in await operators.stats(None)
        ]
        # Bounded as the tally is: the namespaces waiting longest are the ones an operator looks for.
        return sorted(ages, key=lambda a: (-a[1], a[0]))[:cap]

    return await record_ages_alone(inbox.db.conninfo, read_ages, window=window, now=inbox.clock())


async def tally_loop(inbox: Inbox, tally: TrendTally, interval: float = TRENDS_INTERVAL_SECONDS) -> None:
    """Writes the tally every `interval` seconds until cancelled; a failed write is retried with the next."""
    while True:
        await asyncio.sleep(interval)
        try:
            await write_tally(inbox, tally)
        except Unavailable as exc:
            log.warning("trend counts not written (kept for the next minute): %s", exc)
        except Exception:
            log.exception("trend counts not written")


async def ages_loop(operators: Operators, interval: float = TRENDS_INTERVAL_SECONDS) -> None:
    """Records the ages every `interval` seconds until cancelled, on whichever replica holds the lock."""
    while True:
        await asyncio.sleep(interval)
        try:
            await record_ages(operators)
        except Unavailable as exc:
            log.warning("trend ages not recorded: %s", exc)
        except Exception:
            log.exception("trend ages not recorded")
