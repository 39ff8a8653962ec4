"""The benchmark's own PostgreSQL: durable settings, a fresh folder under /tmp, gone afterwards."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import LiteralString

import psycopg
from psycopg import sql

from bench.cpu import children_of, process_cpu_seconds
from inboxd.serving.embedded_pg import EmbeddedPostgres
from inboxd.store.bootstrap import create_database_if_absent
from inboxd.store.migrate import migrate

# The settings a reader of the results needs to know were in force.
SHOWN_SETTINGS = (
    "fsync",
    "synchronous_commit",
    "full_page_writes",
    "wal_sync_method",
    "shared_buffers",
    "max_wal_size",
    "max_connections",
)


@dataclass
class BenchCluster:
    """One durable cluster; `databases` are created on start, the inboxd ones migrated."""

    folder: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="inboxd-bench-pg-")))
    pg: EmbeddedPostgres | None = None

    def start(self) -> None:
        # The cluster runs as `postgres` when we are root: it must reach the folder.
        os.chmod(self.folder, 0o755)
        self.pg = EmbeddedPostgres(data_dir=self.folder / "data", durable=True)
        self.pg.start()

    def url(self, database: str) -> str:
        assert self.pg is not None
        # The embedded cluster wants its password; the URL names its file, not the secret.
        return self.pg.url(database)

    async def create(self, database: str, *, inboxd_schema: bool) -> str:
        await asyncio.to_thread(create_database_if_absent, self.url("postgres"), database)
        url = self.url(database)
        if inboxd_schema:
            await migrate(url)
        return url

    def postmaster_pid(self) -> int:
        assert self.pg is not None
        return int((self.pg.data_dir / "postmaster.pid").read_text().splitlines()[0])

    def cpu_seconds(self) -> float:
        """The postmaster, its live backends, and the backends that already exited."""
        pm = self.postmaster_pid()
        return process_cpu_seconds(pm, with_children=True) + sum(process_cpu_seconds(c) for c in children_of(pm))

    async def facts(self) -> dict[str, str]:
        async with await psycopg.AsyncConnection.connect(self.url("postgres"), autocommit=True) as conn:
            cur = await conn.execute("SHOW server_version")
            row = await cur.fetchone()
            found = {"server_version": str(row[0]) if row else "?"}
            for name in SHOWN_SETTINGS:
                cur = await conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name)))
                row = await cur.fetchone()
                found[name] = str(row[0]) if row else "?"
            return found

    def stop(self) -> None:
        try:
            if self.pg is not None:
                self.pg.stop()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


async def checkpoint(url: str) -> None:
    """Flushes dirty pages now, so no measurement window pays for an earlier one's writes."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("CHECKPOINT")


async def execute(url: str, *statements: LiteralString) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for statement in statements:
            await conn.execute(statement)
