"""Wake-ups between replicas through PostgreSQL's LISTEN/NOTIFY.

NOTIFY inside an accepting transaction would make every commit queue on
PostgreSQL's global notification lock. So signals are sent after the commit,
from a connection of their own, and coalesced: while one NOTIFY is under
way, later signals gather into the next one. A lost signal costs latency,
never an event: waiting claims also poll on a bounded interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections import Counter
from collections.abc import Callable, Iterable

import psycopg

from inboxd.store.database import first_line as _first_line

log = logging.getLogger(__name__)

CHANNEL = "inboxd_events"
# PostgreSQL's limit is 8000 bytes; above this, send "look again, everyone".
_MAX_PAYLOAD = 7000
_RECONNECT_DELAY = 1.0

# Receives [(namespace, event_type, count)], or None for "anything may have changed".
SignalHandler = Callable[[list[tuple[str, str, int]] | None], None]


class ReplicaSignals:
    def __init__(self, conninfo: str, on_signal: SignalHandler) -> None:
        self._conninfo = conninfo
        self._on_signal = on_signal
        self._replica = uuid.uuid4().hex
        self._pending: Counter[tuple[str, str]] = Counter()
        self._has_pending = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._listen()), asyncio.create_task(self._send())]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def publish(self, events: Iterable[tuple[str, str]]) -> None:
        """Tells the other replicas these (namespace, event_type) became claimable."""
        for item in events:
            self._pending[item] += 1
        if self._pending:
            self._has_pending.set()

    async def _send(self) -> None:
        conn: psycopg.AsyncConnection[tuple[object, ...]] | None = None
        while True:
            await self._has_pending.wait()
            self._has_pending.clear()
            batch, self._pending = self._pending, Counter()
            payload = json.dumps({"r": self._replica, "e": [[ns, t, n] for (ns, t), n in batch.items()]})
            if len(payload.encode()) > _MAX_PAYLOAD:
                payload = json.dumps({"r": self._replica, "all": True})
            try:
                if conn is None or conn.closed:
                    conn = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)
                await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload))
            except psycopg.Error as exc:
                # Dropped, not retried: waiters poll anyway, and the database may be down.
                log.warning("could not signal other replicas: %s", _first_line(exc))
                conn = None
                await asyncio.sleep(_RECONNECT_DELAY)

    async def _listen(self) -> None:
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    # Signals sent while we were not listening are lost: look again.
                    self._on_signal(None)
                    async for note in conn.notifies():
                        self._dispatch(note.payload)
            except psycopg.Error as exc:
                log.debug("replica signal listener reconnecting: %s", exc)
                await asyncio.sleep(_RECONNECT_DELAY)

    def _dispatch(self, payload: str) -> None:
        try:
            message = json.loads(payload)
        except ValueError:
            self._on_signal(None)
            return
        if message.get("r") == self._replica:
            return
        if message.get("all"):
            self._on_signal(None)
            return
        self._on_signal([(str(ns), str(t), int(n)) for ns, t, n in message.get("e", [])])
