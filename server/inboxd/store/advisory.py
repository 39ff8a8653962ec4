"""Work that one replica at a time runs: the lease rescuer, retention, and each bulk operation.

A pass holds a session-level advisory lock on a connection of its own, so
only one replica runs it at a time, and runs its batches there, each its own
short transaction: what it did so far stays done if it is interrupted.
Bulk operations, which run for long, share one such connection per replica
(SharedLocks) and run their chunks on the pool.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import psycopg

from inboxd.domain.errors import Unavailable
from inboxd.store.database import first_line
from inboxd.store.queries import QUERIES

AsyncConnection = psycopg.AsyncConnection[tuple[Any, ...]]


@contextlib.asynccontextmanager
async def alone(conninfo: str, lock: int, task: str) -> AsyncIterator[AsyncConnection | None]:
    """A connection that holds advisory lock `lock` for the pass, or None when another replica holds it.

    A database that cannot be reached, before or during the pass, is
    Unavailable, named after `task`.
    """
    try:
        async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True, connect_timeout=10) as conn:
            cur = await conn.execute(QUERIES["advisory_lock_try"], {"lock": lock})
            locked = await cur.fetchone()
            if locked is None or not locked[0]:
                yield None
                return
            try:
                yield conn
            finally:
                if not conn.closed:
                    await conn.execute(QUERIES["advisory_lock_release"], {"lock": lock})
    except psycopg.OperationalError as exc:
        raise Unavailable(f"{task}: database unavailable: {first_line(exc)}") from None


async def still_alone(conn: AsyncConnection, task: str) -> None:
    """Raises Unavailable, named after `task`, unless the session holding the lock still answers.

    A session-level lock is held exactly as long as its session: once the
    session is gone another replica may take the lock, so a holder checks
    before each unit of work rather than carry on beside the new holder.
    """
    try:
        await conn.execute(QUERIES["advisory_session_alive"])
    except psycopg.OperationalError as exc:
        raise Unavailable(f"{task}: lost the session holding its lock: {first_line(exc)}") from None


class SharedLocks:
    """One connection holding many session-level advisory locks: every bulk operation a replica carries.

    A lock per operation still names who carries it, but the locks share one
    session, so a replica costs the database one connection however many
    operations it carries (a connection each let 200 operations take 200).
    The session is opened for the first lock and closed with the last. When
    it is lost, every lock on it is lost with it: `check` then raises
    Unavailable for each, and each holder takes its lock again, on a new
    session, before it goes on.
    """

    def __init__(self, conninfo: str, task: str) -> None:
        self._conninfo = conninfo
        self._task = task
        self._conn: AsyncConnection | None = None
        self._held: set[int] = set()
        # Opening, closing and taking one at a time; checks and the statements themselves need no guard
        # (psycopg runs one statement at a time on a connection).
        self._guard = asyncio.Lock()

    @property
    def held(self) -> int:
        return len(self._held)

    async def take(self, lock: int) -> bool:
        """Takes `lock` on the shared session (opened if need be); False: another session holds it."""
        async with self._guard:
            conn = self._conn
            try:
                if conn is None or conn.closed:
                    self._held.clear()
                    conn = self._conn = await psycopg.AsyncConnection.connect(
                        self._conninfo, autocommit=True, connect_timeout=10
                    )
                if lock in self._held:
                    return False  # this session holds it already: the lock is re-entrant, the carrying is not
                row = await (await conn.execute(QUERIES["advisory_lock_try"], {"lock": lock})).fetchone()
            except psycopg.OperationalError as exc:
                await self._lost(conn)
                raise Unavailable(f"{self._task}: database unavailable: {first_line(exc)}") from None
            if row is not None and row[0]:
                self._held.add(lock)
                return True
            if not self._held:
                await self._lost(conn)
            return False

    async def give_back(self, lock: int) -> None:
        """Lets `lock` go; the last one closes the session."""
        async with self._guard:
            conn = self._conn
            if lock not in self._held or conn is None:
                return
            self._held.discard(lock)
            if not self._held:
                await self._lost(conn)  # closing the session lets its locks go
                return
            try:
                await conn.execute(QUERIES["advisory_lock_release"], {"lock": lock})
            except psycopg.OperationalError:
                await self._lost(conn)

    async def check(self, lock: int) -> None:
        """Raises Unavailable unless the session holding `lock` still answers (see still_alone)."""
        conn = self._conn
        if conn is None or conn.closed or lock not in self._held:
            raise Unavailable(f"{self._task}: lost the session holding its lock")
        try:
            await conn.execute(QUERIES["advisory_session_alive"])
        except psycopg.OperationalError as exc:
            await self._lost(conn)
            raise Unavailable(f"{self._task}: lost the session holding its lock: {first_line(exc)}") from None

    async def close(self) -> None:
        async with self._guard:
            await self._lost(self._conn)

    async def _lost(self, conn: AsyncConnection | None) -> None:
        """Forgets the session `conn` (if it is still the current one) and every lock on it, and closes it."""
        if conn is None:
            return
        if self._conn is conn:
            self._conn = None
            self._held.clear()
        with contextlib.suppress(psycopg.Error):
            await conn.close()
