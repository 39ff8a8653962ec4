"""Stats reads a row per namespace and state and one due-index probe per namespace, never the events, beside a backlog.

As in test_claim_plans.py: a database of the module's own, the statement
PREPAREd and EXPLAINed (ANALYZE, BUFFERS) under both plan cache modes,
counting rows and buffers, never timing. Before migration 0028, Stats
counted every row: 22,000 rows read here, 3 s at 5 million rows.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import psycopg
import pytest

from tests.integration.helpers import own_database
from tests.integration.test_claim_plans import buffers_read, explain_prepared, rows_read

COMPLETED = 20_000
OPEN = 2_000
NAMESPACES = 4
# A probe of the due index per namespace, finding its oldest PENDING event at once.
BOUND = 10 * (NAMESPACES + 1)
# The counts (a row per namespace and state), the changes not folded yet, a few index pages per namespace.
BUFFER_BOUND = 100
MODES = ["force_generic_plan", "force_custom_plan"]


@pytest.fixture(scope="module")
async def backlog_url(migrated_url: str) -> AsyncIterator[str]:
    """COMPLETED completed events, and OPEN pending ones accepted an hour ago, over NAMESPACES namespaces; one quiet."""
    async with own_database(migrated_url, prefix="inboxd_stats_plans") as url:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(
                "INSERT INTO inbox_events (namespace, event_key, event_type, state, accepted_at, available_at,"
                " updated_at, completed_at, disposition) SELECT 'tenant-' || (i %% %s), 'done-' || i, 'test.event',"
                " 'completed', now(), now(), now(), now(), 'applied' FROM generate_series(1, %s) AS i",
                (NAMESPACES, COMPLETED),
            )
            await conn.execute(
                "INSERT INTO inbox_events (namespace, event_key, event_type, raw_payload, accepted_at, available_at,"
                " due_at, updated_at) SELECT 'tenant-' || (i %% %s), 'open-' || i, 'test.event', '\\x7b7d',"
                " now() - interval '1 hour', now() - interval '1 hour', now() - interval '1 hour', now()"
                " FROM generate_series(1, %s) AS i",
                (NAMESPACES, OPEN),
            )
            # A namespace with nothing claimable: its probe finds no row, and must not walk the others' due events.
            await conn.execute(
                "INSERT INTO inbox_events (namespace, event_key, event_type, state, accepted_at, available_at,"
                " updated_at, completed_at, disposition) VALUES ('quiet', 'done', 'test.event', 'completed', now(),"
                " now(), now(), now(), 'applied')"
            )
            await conn.execute("VACUUM ANALYZE inbox_events")
        yield url


@pytest.mark.parametrize("plan_cache_mode", MODES)
@pytest.mark.parametrize("namespace", [None, "tenant-1", "quiet"])
async def test_stats_read_a_bounded_number_of_rows_whatever_the_table_holds(
    backlog_url: str, plan_cache_mode: str, namespace: str | None
) -> None:
    values = {"namespace": namespace, "now": None}
    async with await psycopg.AsyncConnection.connect(backlog_url, autocommit=True) as conn:
        plan = await explain_prepared(conn, plan_cache_mode, "namespace_stats", ("namespace", "now"), values)
    shown = json.dumps(plan["Plan"], indent=1)[:4000]
    assert rows_read(plan) < BOUND, shown
    assert buffers_read(plan) < BUFFER_BOUND, shown
