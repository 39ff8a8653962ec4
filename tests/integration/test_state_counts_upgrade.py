"""Migration 0030 counts the rows already there exactly while an older server goes on writing.

The writes an older server makes (inserts, state changes, deletes, one
transaction open across the upgrade's start) go on through the migration;
afterwards the maintained counts agree with a count of the rows.
"""

from __future__ import annotations

import asyncio

import psycopg

from inboxd.store.migrate import migrate
from tests.harness import eventually
from tests.integration.helpers import own_database

ROWS = 3_000
INSERT = (
    "INSERT INTO inbox_events (namespace, event_key, event_type, raw_payload, accepted_at, available_at, due_at,"
    " updated_at) SELECT 'ns-' || (i %% 3), %s || i, 'test.event', '\\x7b7d', now(), now(), now(), now()"
    " FROM generate_series(1, %s) AS i"
)
FINISH = (
    "UPDATE inbox_events SET state = 'completed', completed_at = now(), disposition = 'applied', due_at = NULL"
    " WHERE ctid IN (SELECT ctid FROM inbox_events WHERE state = 'pending' LIMIT 7)"
)
FORGET = "DELETE FROM inbox_events WHERE ctid IN (SELECT ctid FROM inbox_events WHERE state = 'completed' LIMIT 3)"
COUNTED = (
    "SELECT namespace, state, sum(events)::bigint FROM (SELECT * FROM inbox_state_counts"
    " UNION ALL SELECT * FROM inbox_state_count_changes) AS c GROUP BY 1, 2 HAVING sum(events) <> 0 ORDER BY 1, 2"
)
ROWS_NOW = "SELECT namespace, state, count(*) FROM inbox_events GROUP BY 1, 2 ORDER BY 1, 2"


async def test_the_backfill_counts_every_row_once_while_an_older_server_writes(database_url: str) -> None:
    async with own_database(database_url, migrated=False, prefix="state_counts") as url:
        await migrate(url, up_to=29)
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(INSERT, ("old-", ROWS))
        stop = asyncio.Event()

        async def older_server() -> int:
            writes = 0
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                while not stop.is_set():
                    await conn.execute(INSERT, (f"w{writes}-", 5))
                    await conn.execute(FINISH)
                    await conn.execute(FORGET)
                    writes += 1
            return writes

        async with await psycopg.AsyncConnection.connect(url) as open_across:
            # Begun before the upgrade, committed while it waits for the table: counted once.
            await open_across.execute(INSERT, ("across-", 10))
            writer = asyncio.create_task(older_server())
            upgrade = asyncio.create_task(migrate(url))
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as watcher:

                async def upgrade_waits() -> bool:
                    cur = await watcher.execute(
                        "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'inbox_events'::regclass"
                        " AND mode = 'ShareRowExclusiveLock'"
                    )
                    row = await cur.fetchone()
                    return bool(row and row[0])

                await eventually(upgrade_waits, "the upgrade waiting for the open transaction")
            await open_across.commit()
        assert await asyncio.wait_for(upgrade, timeout=60) == ["0030_state_counts.sql"]
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:

            async def writes_after() -> bool:
                cur = await conn.execute("SELECT count(*) FROM inbox_state_count_changes")
                row = await cur.fetchone()
                return bool(row and row[0] >= 3)

            await eventually(writes_after, "the older server's writes after the upgrade")
            stop.set()
            assert await asyncio.wait_for(writer, timeout=30) > 0
            counted = await (await conn.execute(COUNTED)).fetchall()
            rows = await (await conn.execute(ROWS_NOW)).fetchall()
        assert counted == rows
