"""A DBA reviews an upgrade before it runs: `inboxd migrate --list` and `--sql` read, and apply nothing."""

from __future__ import annotations

import os
import subprocess
import sys

import psycopg

from inboxd.store.migrate import available_migrations
from tests.integration.helpers import own_database


def inboxd_migrate(url: str, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INBOXD_") or k == "INBOXD_PG_BIN"}
    env["DATABASE_URL"] = url
    return subprocess.run(
        [sys.executable, "-m", "inboxd", "migrate", *flags],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def applied_versions(url: str) -> set[int]:
    with psycopg.connect(url) as conn:
        exists = conn.execute("SELECT to_regclass('inboxd_schema_migrations') IS NOT NULL").fetchone()
        if not exists or not exists[0]:
            return set()
        return {row[0] for row in conn.execute("SELECT version FROM inboxd_schema_migrations")}


async def test_list_and_sql_show_the_pending_migrations_and_apply_none(database_url: str) -> None:
    known = available_migrations()
    async with own_database(database_url, migrated=False, prefix="inboxd_review") as url:
        listed = inboxd_migrate(url, "--list")
        assert listed.returncode == 0, listed.stderr
        lines = listed.stdout.splitlines()
        assert [line.split()[-1] for line in lines[:-1]] == [name for _, name, _ in known]
        assert all(line.startswith("pending") for line in lines[:-1])
        assert lines[-1] == f"{len(known)} pending of {len(known)}; review them with --sql"

        shown = inboxd_migrate(url, "--sql")
        assert shown.returncode == 0, shown.stderr
        for _, name, sql in known:
            assert f"-- {name}: applied by `inboxd migrate`" in shown.stdout
            assert sql.strip().splitlines()[-1] in shown.stdout
        assert applied_versions(url) == set(), "--list and --sql apply nothing"

        assert inboxd_migrate(url).returncode == 0
        after = inboxd_migrate(url, "--list")
        assert all(line.startswith("applied") for line in after.stdout.splitlines()[:-1])
        assert after.stdout.splitlines()[-1] == f"0 pending of {len(known)}"
        assert inboxd_migrate(url, "--sql").stdout.strip() == "-- nothing pending: the schema is current"
