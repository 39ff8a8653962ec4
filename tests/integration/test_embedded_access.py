"""`inboxd serve`'s embedded PostgreSQL: no TCP port for strangers to hold, and inboxd without superuser rights.

An unprivileged local user once held 393 connections in the password exchange
of a cluster on 127.0.0.1 and locked inboxd out ("too many clients already").
The cluster now listens only on a Unix socket inside its 0700 data folder, and
inboxd connects there as a plain role that owns its database.
"""

from __future__ import annotations

import shlex
import socket
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from inboxd.serving.embedded_pg import EmbeddedPostgres
from inboxd.store.database import Connection, Database
from inboxd.store.migrate import migrate
from tests.harness import searchable_folder


@pytest.fixture
def folder() -> Iterator[Path]:
    with searchable_folder("inboxd-test-access-") as path:
        yield path


def served(folder: Path) -> EmbeddedPostgres:
    return EmbeddedPostgres(data_dir=folder / "data", durable=False, socket_only=True, app_role="inboxd")


def _tcp_refused(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        return sock.connect_ex(("127.0.0.1", port)) != 0


async def _migrated_and_writable(url: str) -> None:
    await migrate(url)
    db = Database(url, min_size=1, max_size=1)
    await db.open()
    try:

        async def work(conn: Connection) -> object:
            await conn.execute("CREATE TABLE IF NOT EXISTS access_probe (n int)")
            row = await (await conn.execute("SELECT count(*) FROM inbox_events")).fetchone()
            return None if row is None else row[0]

        assert await db.run(work) is not None
    finally:
        await db.close()


async def test_the_served_cluster_listens_on_its_private_socket_alone_and_inboxd_is_no_superuser(folder: Path) -> None:
    pg = served(folder)
    url = pg.start()
    try:
        assert _tcp_refused(pg.port), "the served cluster must not listen on 127.0.0.1"
        assert (pg.data_dir / f".s.PGSQL.{pg.port}").is_socket()
        assert stat.S_IMODE(pg.data_dir.stat().st_mode) == 0o700, "only the cluster's owner may reach the socket"
        with psycopg.connect(url) as conn:
            assert conn.execute("SHOW listen_addresses").fetchone() == ("",)
            row = conn.execute(
                "SELECT current_user, r.rolsuper, r.rolcreatedb, r.rolcreaterole, r.rolreplication,"
                " pg_get_userbyid(d.datdba) FROM pg_roles r, pg_database d"
                " WHERE r.rolname = current_user AND d.datname = current_database()"
            ).fetchone()
        assert row == ("inboxd", False, False, False, False, "inboxd")
        await _migrated_and_writable(url)
    finally:
        pg.stop()


async def test_a_cluster_of_an_older_inboxd_is_moved_off_tcp_and_its_objects_handed_to_the_app_role(
    folder: Path,
) -> None:
    # What inboxd did before: 127.0.0.1, the superuser owning everything inboxd migrated.
    old = EmbeddedPostgres(data_dir=folder / "data", durable=False)
    old_url = old.start()
    await migrate(old_url)
    old.stop()

    pg = served(folder)
    url = pg.start()
    try:
        assert _tcp_refused(pg.port)
        with psycopg.connect(pg.url("inboxd")) as admin:
            foreign = admin.execute(
                "SELECT count(*) FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace"
                " AND c.relkind IN ('r', 'S', 'v') AND pg_get_userbyid(c.relowner) <> 'inboxd'"
            ).fetchone()
            functions = admin.execute(
                "SELECT count(*) FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace"
                " AND pg_get_userbyid(p.proowner) <> 'inboxd'"
            ).fetchone()
        assert foreign == (0,) and functions == (0,), "every table, sequence and function is the app role's"
        await _migrated_and_writable(url)
    finally:
        pg.stop()
    # And again: a second start changes nothing and still serves.
    again = served(folder)
    again.start()
    try:
        await _migrated_and_writable(again.conninfo)
    finally:
        again.stop()


def test_the_served_cluster_keeps_its_port_across_starts_and_the_logged_psql_command_opens_it(
    folder: Path,
) -> None:
    first = served(folder)
    first.start()
    command = first.psql_command()
    first.stop()
    again = served(folder)
    again.start()
    try:
        assert again.port == first.port
        assert again.psql_command() == command
        psql = [str(again.bin_dir / "psql"), *shlex.split(command)[1:], "-Atc", "SELECT current_user"]
        done = subprocess.run(psql, capture_output=True, text=True, timeout=30, check=False)
        assert (done.returncode, done.stdout.strip()) == (0, "inboxd"), done.stderr
    finally:
        again.stop()
