"""At start-up inboxd warns when its database runs with fsync or synchronous_commit off.

A durable cluster of the test's own: the shared test cluster runs with both
off for speed, so it cannot show the silence of a durable one. fsync is
changed by ALTER SYSTEM and a reload; synchronous_commit per session.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import LiteralString

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from inboxd.config.settings import Settings
from inboxd.serving.embedded_pg import EmbeddedPostgres
from inboxd.serving.server import start_server
from inboxd.store.database import Database
from inboxd.store.settings_check import warn_if_not_durable
from tests.conftest import NO_RESCUER
from tests.harness import discard_postgres, eventually, throwaway_postgres

CHECK_LOGGER = "inboxd.store.settings_check"


@pytest.fixture(scope="module")
def durable_pg() -> Iterator[EmbeddedPostgres]:
    pg = throwaway_postgres(durable=True)
    try:
        yield pg
    finally:
        discard_postgres(pg)


async def execute(url: str, sql: LiteralString) -> str:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(sql)
        row = await cur.fetchone() if cur.description else None
        return str(row[0]) if row else ""


async def warnings_for(url: str) -> list[str]:
    db = Database(url, min_size=1, max_size=1)
    await db.open()
    try:
        return await warn_if_not_durable(db)
    finally:
        await db.close()


def without_synchronous_commit(url: str) -> str:
    return make_conninfo(url, options="-c synchronous_commit=off")


async def test_a_durable_database_draws_no_warning(durable_pg: EmbeddedPostgres) -> None:
    assert await warnings_for(durable_pg.conninfo) == []


async def test_synchronous_commit_off_is_named_in_a_warning(durable_pg: EmbeddedPostgres) -> None:
    [warning] = await warnings_for(without_synchronous_commit(durable_pg.conninfo))
    assert "synchronous_commit=off" in warning


async def test_fsync_off_is_named_in_a_warning(durable_pg: EmbeddedPostgres) -> None:
    url = durable_pg.conninfo
    await execute(url, "ALTER SYSTEM SET fsync = off")
    await execute(url, "SELECT pg_reload_conf()")
    try:

        async def reloaded() -> bool:
            return await execute(url, "SHOW fsync") == "off"

        await eventually(reloaded, "the cluster runs with fsync off", within=15.0)
        [warning] = await warnings_for(url)
        assert "fsync=off" in warning
    finally:
        await execute(url, "ALTER SYSTEM RESET fsync")
        await execute(url, "SELECT pg_reload_conf()")


async def test_start_server_logs_the_warning_once(
    durable_pg: EmbeddedPostgres, caplog: pytest.LogCaptureFixture
) -> None:
    db = Database(without_synchronous_commit(durable_pg.conninfo), min_size=1, max_size=2)
    await db.open()
    try:
        with caplog.at_level(logging.WARNING, logger=CHECK_LOGGER):
            running = await start_server(Settings(listen="127.0.0.1:0", rescue_interval=NO_RESCUER), db)
            await running.stop(0.5)
    finally:
        await db.close()
    named = [r for r in caplog.records if r.name == CHECK_LOGGER and "synchronous_commit=off" in r.getMessage()]
    assert len(named) == 1
    assert named[0].levelno == logging.WARNING
