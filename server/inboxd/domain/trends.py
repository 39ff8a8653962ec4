"""The console's trends as plain values: a namespace's per-minute counts and oldest-claimable age.

The store fills them from what the server processes wrote (store/trends.py);
the console draws them. Nothing here knows about PostgreSQL or HTML.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

# How long the trends are kept and shown: the last hours, at one point a minute.
TRENDS_WINDOW = timedelta(hours=6)


@dataclass(frozen=True, slots=True)
class MinuteCounts:
    """What one process counted for one namespace since its last write."""

    namespace: str
    accepted: int = 0
    completed: int = 0
    dead_lettered: int = 0


@dataclass(frozen=True, slots=True)
class NamespaceTrend:
    """One namespace over the window, one entry a minute, oldest first (minutes nothing was written count 0)."""

    namespace: str
    minutes: tuple[datetime, ...]
    accepted: tuple[int, ...]
    completed: tuple[int, ...]
    dead_lettered: tuple[int, ...]
    # Seconds; None for a minute no replica recorded it (or the namespace had no events then).
    oldest_claimable: tuple[float | None, ...]


def minutes_of(end: datetime, window: timedelta) -> tuple[datetime, ...]:
    """The window's minutes ending at `end` (itself a whole minute), oldest first."""
    count = int(window.total_seconds() // 60)
    return tuple(end - timedelta(minutes=count - 1 - i) for i in range(count))
