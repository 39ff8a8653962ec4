"""The inbox's use cases, between the gRPC servicers and the store.

It validates nothing itself (the api layer hands over domain types) and
writes no SQL (the store does); it decides what happens in one transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from inboxd.config import Settings
from inboxd.domain import AcceptResult, NewEvent
from inboxd.store.accepts import accept_events
from inboxd.store.database import Database

# The clock: None means "the database's now()", so replicas agree on time.
Clock = Callable[[], datetime | None]


def database_clock() -> datetime | None:
    return None


@dataclass
class Inbox:
    db: Database
    settings: Settings
    clock: Clock = database_clock

    async def accept(self, events: Sequence[NewEvent]) -> list[AcceptResult]:
        """Accepts events in one transaction; answers only after it commits."""
        now = self.clock()
        return await self.db.run(lambda conn: accept_events(conn, events, now))
