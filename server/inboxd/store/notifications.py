"""Wake-ups between replicas through PostgreSQL's LISTEN/NOTIFY.

NOTIFY inside an accepting transaction would make every commit queue on
PostgreSQL's global notification lock. So signals are sent after the commit,
from a connection of their own, and coalesced: while one NOTIFY is under
way, later signals gather into the next one, one entry per (namespace,
event_type) with its count. And only when it helps: a replica that finds no
other replica listening sends nothing (it looks again every few seconds).
A lost signal costs latency, never an event: waiting claims also poll on a
bounded interval. A process that serves no Claims (the parent under
`--workers N`, which runs the lease rescuer and serves the console's Replay)
only sends: its "others" are all the listeners there are.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping

import psycopg

from inboxd.store.database import first_line as _first_line

log = logging.getLogger(__name__)

CHANNEL = "inboxd_events"
# Every replica's listening connection carries this name, so a replica can
# tell whether anyone else would hear its signals.
LISTENER_NAME = "inboxd-listener"
# How long a "nobody else is listening" finding is trusted.
PEER_CHECK_SECONDS = 5.0
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
        # Set by publish_look_again: the next signal says "look again, everyone" instead of counts.
        self._look_again = False
        self._has_pending = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        # Whether other replicas listen, and when that was last looked up.
        self._peers = True
        # Our own listening connection's backend, so it is not taken for another replica's.
        self._listener_pid: int | None = None
        self._peers_checked_at = float("-inf")
        # Signals sent, and signals dropped because nobody else listened (for tests and metrics).
        self.sent = 0
        self.skipped = 0

    def start(self, *, listen: bool = True) -> None:
        """Sends what `publish` is told; with `listen`, also hears the other replicas."""
        self._tasks = [asyncio.create_task(self._send())]
        if listen:
            self._tasks.append(asyncio.create_task(self._listen()))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    @property
    def listening(self) -> bool:
        """Whether this replica hears the others now (it has told its handler to look again since)."""
        return self._listener_pid is not None

    def publish(self, counts: Mapping[tuple[str, str], int]) -> None:
        """Tells the other replicas how many events of each (namespace, event_type) became claimable."""
        self._pending.update(counts)
        if self._pending:
            self._has_pending.set()

    def publish_look_again(self) -> None:
        """Tells the other replicas that anything may be claimable now (a flow-control rule loosened, say)."""
        self._look_again = True
        self._has_pending.set()

    async def _send(self) -> None:
        conn: psycopg.AsyncConnection[tuple[object, ...]] | None = None
        while True:
            await self._has_pending.wait()
            self._has_pending.clear()
            batch, self._pending = self._pending, Counter()
            look_again, self._look_again = self._look_again, False
            payload = json.dumps({"r": self._replica, "e": [[ns, t, n] for (ns, t), n in batch.items()]})
            if look_again or len(payload.encode()) > _MAX_PAYLOAD:
                payload = json.dumps({"r": self._replica, "all": True})
            try:
                if conn is None or conn.closed:
                    conn = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)
                if not await self._anyone_else_listens(conn):
                    self.skipped += 1
                    continue
                await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload))
                self.sent += 1
            except psycopg.Error as exc:
                # Dropped, not retried: waiters poll anyway, and the database may be down.
                log.warning("could not signal other replicas: %s", _first_line(exc))
                conn = None
                await asyncio.sleep(_RECONNECT_DELAY)

    async def _anyone_else_listens(self, conn: psycopg.AsyncConnection[tuple[object, ...]]) -> bool:
        """Whether a replica other than this one listens; looked up at most every PEER_CHECK_SECONDS."""
        now = time.monotonic()
        if now - self._peers_checked_at >= PEER_CHECK_SECONDS:
            # By pid, not by count: while our own listener (re)connects, one other listener is not "just us".
            cur = await conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = %s"
                " AND pid IS DISTINCT FROM %s",
                (LISTENER_NAME, self._listener_pid),
            )
            row = await cur.fetchone()
            self._peers = row is None or int(str(row[0])) > 0
            self._peers_checked_at = now
        return self._peers

    async def _listen(self) -> None:
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self._conninfo, autocommit=True, application_name=LISTENER_NAME
                ) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    self._listener_pid = conn.info.backend_pid
                    # Signals sent while we were not listening are lost: look again.
                    self._on_signal(None)
                    async for note in conn.notifies():
                        self._dispatch(note.payload)
            except psycopg.Error as exc:
                self._listener_pid = None
                log.debug("replica signal listener reconnecting: %s", exc)
                await asyncio.sleep(_RECONNECT_DELAY)
            except Exception:
                self._listener_pid = None
                # Whatever breaks here, cross-replica wake-ups must come back.
                log.exception("replica signal listener failed; reconnecting")
                await asyncio.sleep(_RECONNECT_DELAY)

    def _dispatch(self, payload: str) -> None:
        """Hands a notification to the handler; any database user may NOTIFY, so any payload must be survivable."""
        try:
            message = json.loads(payload)
            if isinstance(message, dict) and message.get("r") == self._replica:
                return  # our own signal: our waiters were told directly
            entries = _entries(message)
        except (ValueError, TypeError):
            log.debug("unreadable replica signal; every waiter looks again")
            entries = None
        self._on_signal(entries)


def _entries(message: object) -> list[tuple[str, str, int]] | None:
    """A signal's (namespace, event_type, count) entries; None means "anything may have changed"."""
    if not isinstance(message, dict):
        raise ValueError("a replica signal is a JSON object")
    if message.get("all"):
        return None
    entries = message.get("e")
    if not isinstance(entries, list):
        raise ValueError("a replica signal's e is a list")
    parsed = []
    for entry in entries:
        if not isinstance(entry, list) or len(entry) != 3:
            raise ValueError("a replica signal's entry is [namespace, event_type, count]")
        namespace, event_type, count = entry
        if not isinstance(namespace, str) or not isinstance(event_type, str) or type(count) is not int:
            raise ValueError("a replica signal's entry is [namespace, event_type, count]")
        parsed.append((namespace, event_type, max(count, 0)))
    return parsed
