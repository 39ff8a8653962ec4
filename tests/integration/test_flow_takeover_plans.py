"""A takeover at the limit reads the namespace's leased rows and the expired ones by key, never its backlog.

As in test_claim_plans.py: a database of the module's own, the claim
statement PREPAREd and EXPLAINed (ANALYZE, BUFFERS) under both plan cache
modes, rolled back, counting rows and buffers, never timing. The backlog's
PENDING events are older than the expired leases, so a takeover that looked
for them in due order would read every one of them first.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import psycopg
import pytest

from inboxd.domain.namespace_patterns import grant_to_like
from tests.integration.helpers import own_database
from tests.integration.test_claim_plans import BACKLOG, BOUND, buffers_read, explain_claim, load_backlog, rows_read

LIMITED = "tenant-a/busy"
# A claim that writes (two takeovers, their ledger rows, their index entries) touches more pages than
# test_claim_plans' empty look: bounded still, and far below the backlog's own index (checked below).
PAGES = 300


@pytest.fixture(scope="module")
async def full_limit_url(migrated_url: str) -> AsyncIterator[str]:
    """BACKLOG due PENDING events in LIMITED under max_in_flight 2, and its 2 leases expired a minute ago."""
    async with own_database(migrated_url, prefix="inboxd_takeover_plans") as url:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await load_backlog(conn, LIMITED)
            await conn.execute(
                "INSERT INTO inbox_events (namespace, event_key, event_type, payload, accepted_at, available_at,"
                " due_at, updated_at, state, attempt, claim_token, fencing_token, lease_expires_at, worker_id)"
                " SELECT %s, 'held' || i, 'test.event', '{}', now() - interval '1 hour',"
                "        now() - interval '1 hour', now() - interval '1 minute', now(), 'processing', 1,"
                "        'gone-' || i, nextval('inbox_fencing_tokens'), now() - interval '1 minute', 'vanished'"
                " FROM generate_series(1, 2) AS i",
                (LIMITED,),
            )
            await conn.execute(
                "INSERT INTO inbox_flow_rules (pattern, like_pattern, is_pattern, specificity, max_in_flight,"
                " updated_at, updated_by) VALUES (%s, %s, false, 0, 2, now(), 'test')",
                (LIMITED, grant_to_like(LIMITED)),
            )
            await conn.execute("VACUUM ANALYZE inbox_events")
        yield url


@pytest.mark.parametrize("plan_cache_mode", ["force_generic_plan", "force_custom_plan"])
async def test_a_takeover_at_the_limit_reads_a_bounded_number_of_rows_beside_its_own_backlog(
    full_limit_url: str, plan_cache_mode: str
) -> None:
    async with await psycopg.AsyncConnection.connect(full_limit_url, autocommit=True) as conn:
        plan = await explain_claim(conn, plan_cache_mode, namespaces=[LIMITED], max_events=10)
    shown = json.dumps(plan["Plan"], indent=1)[:4000]
    # The two expired leases are the answer's two rows; no fresh event, the limit being full.
    assert plan["Plan"]["Actual Rows"] == 2, shown
    assert rows_read(plan) < BOUND, shown
    # The turn's function reads the leased rows: its buffers count in the statement's. Reading the BACKLOG
    # rows' range of inbox_events_namespace_due alone would be more pages than PAGES.
    assert buffers_read(plan) < PAGES, shown
    async with await psycopg.AsyncConnection.connect(full_limit_url, autocommit=True) as conn:
        cur = await conn.execute("SELECT pg_relation_size('inbox_events_namespace_due') / 8192")
        row = await cur.fetchone()
    assert row is not None and row[0] > PAGES, f"{row} index pages for {BACKLOG} rows"
