"""Versioned schema migrations, applied in order under an advisory lock.

Every replica runs this at start-up; the lock makes them take turns, and the
version table makes the second one find nothing to do. Tables that were
never analyzed are analyzed before the server takes calls: without
statistics the planner guesses, and its guesses for a fresh install were
sequential scans that ran the first minute at a third of the speed.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from typing import LiteralString

import psycopg
from psycopg import sql

from inboxd.domain.errors import Unavailable
from inboxd.store.database import first_line

log = logging.getLogger(__name__)

# Any fixed number; it names "inboxd migrations" among the cluster's advisory locks.
_MIGRATION_LOCK = 7_311_001

# inboxd's tables: analyzed after migrating when they have no statistics yet.
_TABLES: tuple[LiteralString, ...] = (
    "inbox_events",
    "inbox_claims",
    "inbox_actions",
    "inbox_conflicts",
    "inbox_replays",
)

# pg_class.reltuples is -1 until a table's first VACUUM or ANALYZE (PostgreSQL 14+).
_NEVER_ANALYZED: LiteralString = """
SELECT c.relname FROM pg_class AS c
WHERE c.oid = ANY(%s::regclass[]) AND c.reltuples < 0
"""

# A migration whose first line is this runs one statement at a time outside a
# transaction, for what cannot run inside one (CREATE INDEX CONCURRENTLY). Its
# statements end with `;` at the end of a line and hold no dollar-quoted
# bodies; each must be safe to run again, since a run cut short starts over.
_NO_TRANSACTION = "-- inboxd: no transaction"
_STATEMENT_END = re.compile(r";[ \t]*$", re.MULTILINE)
# How often a process that finds another migrating looks again.
_LOCK_POLL_SECONDS = 0.2

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


@dataclass(frozen=True)
class MigrationState:
    """One migration as a DBA reviews it: applied (and when), or pending, with its SQL."""

    version: int
    name: str
    sql: str
    applied_at: datetime | None


async def migration_states(conninfo: str) -> list[MigrationState]:
    """Every migration this inboxd knows, applied or pending, in order; reads only (nothing is applied or locked)."""
    try:
        async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True, connect_timeout=10) as conn:
            cur = await conn.execute("SELECT to_regclass('inboxd_schema_migrations') IS NOT NULL")
            row = await cur.fetchone()
            applied: dict[int, datetime] = {}
            if row is not None and row[0]:
                cur = await conn.execute("SELECT version, applied_at FROM inboxd_schema_migrations")
                applied = {version: at for version, at in await cur.fetchall()}
    except psycopg.OperationalError as exc:
        raise Unavailable(f"database unavailable: {first_line(exc)}") from None
    return [MigrationState(v, name, sql, applied.get(v)) for v, name, sql in available_migrations()]


async def migrate(conninfo: str, *, up_to: int | None = None) -> list[str]:
    """Applies what is missing; returns the names of the migrations applied.

    `up_to` stops after that version (tests build the schema an older release
    left, to upgrade it). Raises Unavailable when the database cannot be reached.
    """
    try:
        return await _migrate(conninfo, up_to)
    except psycopg.OperationalError as exc:
        raise Unavailable(f"database unavailable: {first_line(exc)}") from None


async def _migrate(conninfo: str, up_to: int | None) -> list[str]:
    applied: list[str] = []
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True, connect_timeout=10) as conn:
        await _take_lock(conn)
        try:
            await conn.execute(_VERSION_TABLE)
            cur = await conn.execute("SELECT version FROM inboxd_schema_migrations")
            done = {row[0] for row in await cur.fetchall()}
            for version, name, sql in available_migrations():
                if version in done:
                    continue
                if up_to is not None and version > up_to:
                    break
                record = "INSERT INTO inboxd_schema_migrations (version, name) VALUES (%s, %s)"
                if sql.startswith(_NO_TRANSACTION):
                    for statement in _statements(sql):
                        await conn.execute(statement)
                    await conn.execute(record, (version, name))
                else:
                    async with conn.transaction():
                        await conn.execute(sql)
                        await conn.execute(record, (version, name))
                log.info("applied migration %s", name)
                applied.append(name)
            await _analyze_fresh_tables(conn)
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (_MIGRATION_LOCK,))
    return applied


async def _take_lock(conn: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
    """Takes the migrations' advisory lock, trying again until it is free.

    Not pg_advisory_lock: a session waiting in it holds a snapshot, and
    CREATE INDEX CONCURRENTLY in the holder's migration waits for every
    snapshot to end, so the two would wait for each other.
    """
    while True:
        cur = await conn.execute("SELECT pg_try_advisory_lock(%s)", (_MIGRATION_LOCK,))
        row = await cur.fetchone()
        if row is not None and row[0]:
            return
        await asyncio.sleep(_LOCK_POLL_SECONDS)


def _statements(script: LiteralString) -> list[LiteralString]:
    """A no-transaction migration's statements, each alone (comments and blank lines between them dropped)."""
    out: list[LiteralString] = []
    for chunk in _STATEMENT_END.split(script):
        code = "\n".join(line for line in chunk.splitlines() if not line.lstrip().startswith("--")).strip()
        if code:
            out.append(code)
    return out


async def _analyze_fresh_tables(conn: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
    """ANALYZE the tables autovacuum has not reached yet, so the first plans rest on statistics."""
    cur = await conn.execute(_NEVER_ANALYZED, (list(_TABLES),))
    fresh = {row[0] for row in await cur.fetchall()}
    for table in _TABLES:
        if table in fresh:
            await conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(table)))
            log.info("analyzed %s", table)
