"""Versioned schema migrations, applied in order under an advisory lock.

Every replica runs this at start-up; the lock makes them take turns, and the
version table makes the second one find nothing to do.
"""

from __future__ import annotations

import logging
from importlib import resources
from typing import LiteralString

import psycopg

from inboxd.errors import Unavailable
from inboxd.store.database import first_line

log = logging.getLogger(__name__)

# Any fixed number; it names "inboxd migrations" among the cluster's advisory locks.
_MIGRATION_LOCK = 7_311_001

_VERSION_TABLE: LiteralString = """
CREATE TABLE IF NOT EXISTS inboxd_schema_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""


def available_migrations() -> list[tuple[int, str, LiteralString]]:
    """(version, file name, SQL) for every file in migrations/, in order."""
    folder = resources.files("inboxd.store").joinpath("migrations")
    found: list[tuple[int, str, LiteralString]] = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            version = int(entry.name.split("_", 1)[0])
            found.append((version, entry.name, entry.read_text(encoding="utf-8")))
    found.sort()
    return found


async def migrate(conninfo: str) -> list[str]:
    """Applies what is missing; returns the names of the migrations applied.

    Raises Unavailable when the database cannot be reached.
    """
    try:
        return await _migrate(conninfo)
    except psycopg.OperationalError as exc:
        raise Unavailable(f"database unavailable: {first_line(exc)}") from None


async def _migrate(conninfo: str) -> list[str]:
    applied: list[str] = []
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True, connect_timeout=10) as conn:
        await conn.execute("SELECT pg_advisory_lock(%s)", (_MIGRATION_LOCK,))
        try:
            await conn.execute(_VERSION_TABLE)
            cur = await conn.execute("SELECT version FROM inboxd_schema_migrations")
            done = {row[0] for row in await cur.fetchall()}
            for version, name, sql in available_migrations():
                if version in done:
                    continue
                async with conn.transaction():
                    await conn.execute(sql)
                    await conn.execute(
                        "INSERT INTO inboxd_schema_migrations (version, name) VALUES (%s, %s)",
                        (version, name),
                    )
                log.info("applied migration %s", name)
                applied.append(name)
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (_MIGRATION_LOCK,))
    return applied
