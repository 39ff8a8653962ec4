"""A bulk operation's chunk reads its own matches by key, never the inbox around them, however large it is.

As in test_claim_plans.py: a database of the module's own, the chunk's
statement PREPAREd and EXPLAINed (ANALYZE, BUFFERS) under both plan cache
modes and rolled back, counting rows, never timing.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from inboxd.store.queries import QUERIES
from tests.integration.helpers import own_database
from tests.integration.test_claim_plans import explain_prepared, rows_read

# The inbox around the matches: dead letters of another namespace, and matches of the filter's own.
BACKLOG, MATCHES, CHUNK = 20_000, 2_000, 500
MODES = ["force_generic_plan", "force_custom_plan"]
OPERATION = uuid.UUID("00000000-0000-4000-8000-0000000b0001")
DEAD = (
    "INSERT INTO inbox_events (namespace, event_key, event_type, payload, state, attempt, last_error, accepted_at,"
    " available_at, updated_at) SELECT %s, 'k' || i, 'test.event', '{}', 'dead_lettered', 3, %s,"
    " now() - interval '1 hour' + i * interval '1 ms', now(), now() FROM generate_series(1, %s) AS i"
)


@pytest.fixture(scope="module")
async def matched_url(migrated_url: str) -> AsyncIterator[str]:
    """BACKLOG dead letters in tenant-a/busy, MATCHES in tenant-b/mail, and an operation that matched the latter."""
    async with own_database(migrated_url, prefix="inboxd_bulk_plans") as url:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(DEAD, ("tenant-a/busy", "HTTP 500", BACKLOG))
            await conn.execute(DEAD, ("tenant-b/mail", "SMTP timeout", MATCHES))
            await conn.execute(
                QUERIES["bulk_operation_insert"],
                {
                    "operation": OPERATION,
                    "namespace_pattern": "tenant-*",
                    "like_pattern": "tenant-%",
                    "event_types": [],
                    "states": ["dead_lettered"],
                    "accepted_from": None,
                    "accepted_until": None,
                    "error_contains": "SMTP",
                    "ordering_key": "",
                    "action": "replay",
                    "reason": "plans",
                    "rate": 0.0,
                    "dry_run": False,
                    "subscription": "",
                    "actor": "test",
                    "now": None,
                },
            )
            cur = await conn.execute(
                QUERIES["bulk_matches_insert"], {"operation": OPERATION, "states": ["dead_lettered"], "exact": None}
            )
            assert (await cur.fetchone()) == (MATCHES,)
            await conn.execute("VACUUM ANALYZE inbox_events")
            await conn.execute("VACUUM ANALYZE inbox_bulk_matches")
        yield url


CHUNK_VALUES = {
    "operation": OPERATION,
    "limit": CHUNK,
    "actor": "test",
    "reason": "plans",
    "spacing": timedelta(0),
    "now": None,
}


@pytest.mark.parametrize("after", [0, MATCHES - CHUNK // 2])
@pytest.mark.parametrize("query", ["event_bulk_lock", "event_bulk_replay", "event_bulk_ignore"])
@pytest.mark.parametrize("plan_cache_mode", MODES)
async def test_a_chunk_reads_its_matches_by_key_and_nothing_of_the_backlog_beside_them(
    matched_url: str, plan_cache_mode: str, query: str, after: int
) -> None:
    values = {**CHUNK_VALUES, "after": after}
    if query == "event_bulk_ignore":
        del values["spacing"]  # an ignored event is not claimable: nothing to pace
    if query == "event_bulk_lock":  # the chunk's first statement: its matches locked, nothing written
        values = {"operation": OPERATION, "after": after, "limit": CHUNK, "states": ["completed", "dead_lettered"]}
    async with await psycopg.AsyncConnection.connect(matched_url, autocommit=True) as conn:
        plan = await explain_prepared(conn, plan_cache_mode, query, tuple(values), values)
    # Each match of the chunk is one row of inbox_events, reached by its key to lock it, by its tuple id
    # to write it, and once written (the ModifyTable node): three per match, none of the backlog's 20,000.
    assert rows_read(plan) <= 3 * CHUNK + 10, _scans(plan)
    by_key = {("Index Scan", "inbox_events_pkey"), ("Tid Scan", None), ("ModifyTable", None)}
    if query == "event_bulk_lock":
        assert rows_read(plan) <= CHUNK + 10, _scans(plan)
    assert {(scan["Node Type"], scan["Index Name"]) for scan in json.loads(_scans(plan))} <= by_key, _scans(plan)


def _scans(plan: dict[str, Any]) -> str:
    """The plan's scans of inbox_events, for a failure's message."""
    found, nodes = [], [plan["Plan"]]
    while nodes:
        node = nodes.pop()
        nodes.extend(node.get("Plans", []))
        if node.get("Relation Name") == "inbox_events":
            keys = ("Node Type", "Index Name", "Actual Rows", "Actual Loops", "Rows Removed by Filter")
            found.append({k: node.get(k) for k in keys})
    return json.dumps(found, indent=1)
