"""Presence: what a server process writes about its live Work streams, and how long that stays true.

Each process writes its rows every PRESENCE_PERIOD while it has streams (and
once more after its last one ends); a reader counts a row as live for
PRESENCE_FRESH_FOR after it was written, so a process that died stops
counting within three periods, and a stream that ended within one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

PRESENCE_PERIOD = timedelta(seconds=10)
# Two lost writes (the database briefly down) do not make a live worker vanish.
PRESENCE_FRESH_FOR = 3 * PRESENCE_PERIOD
# Rows of a process gone this long are deleted by whichever process writes next.
PRESENCE_FORGET_AFTER = timedelta(hours=1)


class Coverage(StrEnum):
    """What a stream's subscription covers: the namespaces it named, a token's grants, or every namespace."""

    NAMESPACE = "namespace"
    PATTERN = "pattern"
    EVERY = "every"


@dataclass(frozen=True, slots=True)
class PresenceRow:
    """One worker's live streams in one process that cover one target, and the events they hold."""

    worker_id: str
    covers: Coverage
    # The namespace, or the SQL LIKE pattern; "" for every namespace.
    target: str
    streams: int
    held: int
