"""Work that one replica at a time runs: the lease rescuer, retention, and each bulk operation.

A pass holds a session-level advisory lock on a connection of its own, so
only one replica runs it at a time, and runs its batches there, each its own
short transaction: what it did so far stays done if it is interrupted.
"""

from __future__ import annotations

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
