"""The presence writer: each server process tells PostgreSQL what its live Work streams are, once per period.

An admin call or the console lands on one process (under `--workers N`, the
parent, which holds no streams), and a replica knows only its own streams: so
every process writes its streams' worker ids and what they cover into
inbox_presence, and Stats counts from there (store/presence.py). One
statement per process per period, whatever the number of streams: an idle
stream costs no statement of its own. A process with no streams writes once
more after its last one ended (its rows go), then nothing. No advisory lock:
each process writes only its own rows.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Iterable

from inboxd.domain.presence import PRESENCE_PERIOD, Coverage, PresenceRow
from inboxd.store import presence as store
from inboxd.usecases.inbox import Inbox
from inboxd.usecases.streams import LiveStream

log = logging.getLogger(__name__)


def presence_rows(streams: Iterable[LiveStream]) -> list[PresenceRow]:
    """One row per (worker, what its streams cover), with the number of streams and the events they hold."""
    counts: dict[tuple[str, Coverage, str], tuple[int, int]] = {}
    for stream in streams:
        if stream.namespaces:
            covered = [(Coverage.NAMESPACE, ns) for ns in stream.namespaces]
        elif stream.namespace_patterns:
            covered = [(Coverage.PATTERN, pattern) for pattern in stream.namespace_patterns]
        else:
            covered = [(Coverage.EVERY, "")]
        for covers, target in covered:
            key = (stream.worker_id, covers, target)
            count, held = counts.get(key, (0, 0))
            counts[key] = (count + 1, held + stream.held)
    return [PresenceRow(worker, covers, target, n, held) for (worker, covers, target), (n, held) in counts.items()]


def new_process_id() -> str:
    """This server process among all of them: its host, its pid, and a suffix of its own (pids are reused)."""
    return f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"


class PresenceWriter:
    """Writes one process's presence every `period` seconds while it has streams, and once after the last."""

    def __init__(self, inbox: Inbox, process_id: str | None = None) -> None:
        self._inbox = inbox
        self.process_id = process_id or new_process_id()
        self.period = PRESENCE_PERIOD.total_seconds()
        # Whether the database holds rows of ours (so an empty set still has to be written once).
        self._written = False
        self.writes = 0
        self._task: asyncio.Task[None] | None = None

    async def write_now(self) -> bool:
        """One write of what the streams are now, if there is anything to say; returns whether it wrote."""
        rows = presence_rows(self._inbox.streams.live())
        if not rows and not self._written:
            return False
        now = self._inbox.clock()
        await self._inbox.db.run(
            lambda conn: store.replace_presence(conn, self.process_id, rows, now), transaction=False
        )
        self._written = bool(rows)
        self.writes += 1
        return True

    def start(self) -> None:
        self._task = asyncio.create_task(self._forever())

    def every(self, period: float) -> None:
        """Writes every `period` seconds from now on (tests shorten it, or lengthen it to write only by hand)."""
        if self._task is not None:
            self._task.cancel()
        self.period = period
        self.start()

    async def stop(self) -> None:
        """Stops writing; once the streams are closed, clears this process's rows (best effort)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        try:
            await self.write_now()
        except Exception as exc:  # noqa: BLE001 - the rows then age out as a dead process's would
            log.warning("presence not cleared at stop: %s", exc or type(exc).__name__)

    async def _forever(self) -> None:
        while True:
            await asyncio.sleep(self.period)
            try:
                await self.write_now()
            except Exception as exc:  # noqa: BLE001 - the database may be down; the next period tries again
                log.warning("presence of Work streams not written: %s", exc or type(exc).__name__)
