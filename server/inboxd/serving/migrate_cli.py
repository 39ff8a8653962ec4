"""`inboxd migrate`: apply the migrations, or, for a DBA's review first, list them or print the pending SQL.

As River's migrate-list and migrate-get: a DBA sees what an upgrade will run
before it runs. `--list` and `--sql` read only; they apply and lock nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os

from inboxd.config.settings import Settings
from inboxd.serving.database_choice import ChosenDatabase
from inboxd.store.migrate import MigrationState, migrate, migration_states


def add_migrate_options(parser: argparse.ArgumentParser) -> None:
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--list", action="store_true", help="show each migration as applied (and when) or pending")
    shown.add_argument("--sql", action="store_true", help="print the pending migrations' SQL without applying it")


async def run_migrate(settings: Settings, args: argparse.Namespace) -> None:
    database = ChosenDatabase(settings, os.environ)
    url = await asyncio.to_thread(database.start)
    try:
        if args.list:
            print(listing(await migration_states(url)))
        elif args.sql:
            print(pending_sql(await migration_states(url)))
        else:
            applied = await migrate(url)
            print("applied: " + (", ".join(applied) if applied else "nothing, the schema is current"))
    finally:
        await asyncio.to_thread(database.stop)


def listing(states: list[MigrationState]) -> str:
    """One line per migration: `applied  2026-12-01T10:00:00Z  0021_flow_control.sql` or `pending  ...`."""
    lines = []
    for state in states:
        when = state.applied_at.strftime("%Y-%m-%dT%H:%M:%SZ") if state.applied_at else "-" * 20
        lines.append(f"{'applied' if state.applied_at else 'pending'}  {when}  {state.name}")
    pending = sum(1 for state in states if state.applied_at is None)
    lines.append(f"{pending} pending of {len(states)}" + ("; review them with --sql" if pending else ""))
    return "\n".join(lines)


def pending_sql(states: list[MigrationState]) -> str:
    """The pending migrations' SQL, each under a header naming it; says so when nothing is pending."""
    pending = [state for state in states if state.applied_at is None]
    if not pending:
        return "-- nothing pending: the schema is current"
    parts = [
        f"-- {state.name}: applied by `inboxd migrate` (or the first server to start), in one transaction"
        + (" per statement" if state.sql.startswith("-- inboxd: no transaction") else "")
        + f", then recorded in inboxd_schema_migrations as version {state.version}\n{state.sql.rstrip()}\n"
        for state in pending
    ]
    return "\n".join(parts)
