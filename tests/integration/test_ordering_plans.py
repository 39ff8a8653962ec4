"""Ordering keys cost only the rows that have one: Claim plans beside and over a keyed backlog.

The same method as test_claim_plans.py: EXPLAIN (ANALYZE, BUFFERS) of the
PREPAREd claim statement under generic and custom plans, counting rows and
buffers, never times.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from tests.integration.helpers import own_database
from tests.integration.test_claim_plans import (
    _POLL_PARAMETERS,
    BOUND,
    _walk,
    buffers_read,
    explain_claim,
    explain_prepared,
    load_backlog,
    rows_read,
)

KEYED_BACKLOG = 100_000
KEYS = 1_000


async def load_keyed_backlog(conn: Any, namespace: str) -> None:
    """KEYED_BACKLOG due PENDING events over KEYS ordering keys, each key's revisions in due order."""
    await conn.execute(
        "INSERT INTO inbox_events (namespace, event_key, event_type, payload, accepted_at, available_at,"
        " due_at, updated_at, ordering_key, revision)"
        " SELECT %s, 'k' || i, 'test.event', '{}', now() - interval '1 hour', now() - interval '1 hour',"
        "        now() - interval '1 hour' + i * interval '1 ms', now(), 'key-' || (i %% %s), i / %s + 1"
        " FROM generate_series(1, %s) AS i",
        (namespace, KEYS, KEYS, KEYED_BACKLOG),
    )
    await conn.execute("ANALYZE inbox_events")
    await conn.execute("ANALYZE inbox_ordering_keys")


@pytest.fixture(scope="module")
async def keyed_url(migrated_url: str) -> AsyncIterator[str]:
    async with own_database(migrated_url, prefix="inboxd_plans") as url:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await load_keyed_backlog(conn, "tenant-a/keyed")
            await load_backlog(conn, "tenant-a/busy")
        yield url


@pytest.mark.parametrize("plan_cache_mode", ["force_generic_plan", "force_custom_plan"])
async def test_a_claim_on_an_empty_namespace_beside_a_keyed_backlog_reads_a_bounded_number_of_rows(
    keyed_url: str, plan_cache_mode: str
) -> None:
    async with await psycopg.AsyncConnection.connect(keyed_url, autocommit=True) as conn:
        plan = await explain_claim(conn, plan_cache_mode, namespaces=["tenant-b/empty"])
    assert rows_read(plan) < BOUND, json.dumps(plan["Plan"], indent=1)[:4000]
    assert buffers_read(plan) < BOUND, json.dumps(plan["Plan"], indent=1)[:4000]


@pytest.mark.parametrize("plan_cache_mode", ["force_generic_plan", "force_custom_plan"])
async def test_a_claim_over_free_ordering_keys_reads_about_what_it_takes(keyed_url: str, plan_cache_mode: str) -> None:
    async with await psycopg.AsyncConnection.connect(keyed_url, autocommit=True) as conn:
        plan = await explain_claim(conn, plan_cache_mode, namespaces=["tenant-a/keyed"], max_events=10)
    # Ten candidates, each its key's first: its own row, one probe of its key row, one of the key's index range.
    assert rows_read(plan) < BOUND, json.dumps(plan["Plan"], indent=1)[:4000]
    assert buffers_read(plan) < 5 * BOUND, json.dumps(plan["Plan"], indent=1)[:4000]
    # The key rows by primary key, one probe per keyed candidate: never a scan of every key.
    scans = {(n["Node Type"], n.get("Relation Name")) for n in _walk(plan["Plan"])}
    assert ("Seq Scan", "inbox_ordering_keys") not in scans, json.dumps(plan["Plan"], indent=1)[:4000]


@pytest.mark.parametrize("plan_cache_mode", ["force_generic_plan", "force_custom_plan"])
@pytest.mark.parametrize("namespace", ["tenant-a/busy", "tenant-a/keyed"])
async def test_a_claim_beside_keyed_backlogs_is_never_costed_over_the_jit_threshold(
    keyed_url: str, plan_cache_mode: str, namespace: str
) -> None:
    # The generic plan estimates the due scan at a tenth of the table; the key test in its filter
    # once costed as a subplan per row put the statement over jit_above_cost, and every execution
    # of the prepared statement then spent about 100 ms compiling it.
    async with await psycopg.AsyncConnection.connect(keyed_url, autocommit=True) as conn:
        cur = await conn.execute("SELECT current_setting('jit_above_cost')::float8")
        row = await cur.fetchone()
        assert row is not None
        plan = await explain_claim(conn, plan_cache_mode, namespaces=[namespace], max_events=10)
    assert "JIT" not in plan, plan["JIT"]
    assert plan["Plan"]["Total Cost"] < float(row[0]) / 2, plan["Plan"]["Total Cost"]


# The wake-up poller judges keys as a Claim does, and a freed key's next event is looked up alone.
_NO_WAITERS: dict[str, list[str]] = {
    "prefixes": [],
    "patterns": [],
    "namespaces": [],
    "event_types": [],
    "pattern_types": [],
}


@pytest.mark.parametrize("plan_cache_mode", ["force_generic_plan", "force_custom_plan"])
async def test_the_wake_up_poll_over_free_ordering_keys_reads_about_what_it_counts(
    keyed_url: str, plan_cache_mode: str
) -> None:
    values = {
        **_NO_WAITERS,
        "namespaces": ["tenant-a/keyed"],
        "event_types": [""],
        "anywhere_types": [],
        "now": None,
        "cap": 10,
        "ignore_stale": True,
    }
    async with await psycopg.AsyncConnection.connect(keyed_url, autocommit=True) as conn:
        cur = await conn.execute("SELECT current_setting('jit_above_cost')::float8")
        row = await cur.fetchone()
        assert row is not None
        plan = await explain_prepared(conn, plan_cache_mode, "event_due_kinds", _POLL_PARAMETERS, values)
    assert rows_read(plan) < BOUND, json.dumps(plan["Plan"], indent=1)[:4000]
    assert buffers_read(plan) < 5 * BOUND, json.dumps(plan["Plan"], indent=1)[:4000]
    assert "JIT" not in plan, plan["JIT"]
    assert plan["Plan"]["Total Cost"] < float(row[0]) / 2, plan["Plan"]["Total Cost"]


@pytest.mark.parametrize("plan_cache_mode", ["force_generic_plan", "force_custom_plan"])
async def test_looking_up_the_next_events_of_freed_keys_reads_a_few_rows_per_key(
    keyed_url: str, plan_cache_mode: str
) -> None:
    finished = [f"k{i}" for i in range(1, 11)]
    values = {"namespaces": ["tenant-a/keyed"] * len(finished), "event_keys": finished, "now": None}
    parameters = ("namespaces", "event_keys", "now", "ignore_stale")
    async with await psycopg.AsyncConnection.connect(keyed_url, autocommit=True) as conn:
        plan = await explain_prepared(
            conn, plan_cache_mode, "event_next_of_keys", parameters, {**values, "ignore_stale": True}
        )
    assert rows_read(plan) < BOUND, json.dumps(plan["Plan"], indent=1)[:4000]
    assert buffers_read(plan) < 5 * BOUND, json.dumps(plan["Plan"], indent=1)[:4000]
    scans = {(n["Node Type"], n.get("Relation Name")) for n in _walk(plan["Plan"])}
    assert ("Seq Scan", "inbox_ordering_keys") not in scans, json.dumps(plan["Plan"], indent=1)[:4000]
    assert ("Seq Scan", "inbox_events") not in scans, json.dumps(plan["Plan"], indent=1)[:4000]
