"""A Claim's cost does not depend on other namespaces' backlog, and plans are good from the first second.

Each test runs in a database of its own, freshly migrated, so a 100,000-event
backlog never meets another test's Claims. Plans are read from EXPLAIN
(ANALYZE, BUFFERS) of the claim statement, PREPAREd so that
`force_generic_plan` really runs the generic plan psycopg's prepared
statement may get after five executions: counts of rows and buffers, never times.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from inboxd.store.queries import numbered
from inboxd.usecases.inbox import CLAIM_ANSWER_BYTES
from tests.integration.helpers import own_database

BACKLOG = 100_000
OTHER_NAMESPACES = 300
# Generous: the claim reads a handful of index pages for an empty namespace,
# and the old plan read all 100,000 rows of the other namespace.
BOUND = 100

# The claim statement's parameters, in the order PREPARE numbers them.
_PARAMETERS = (
    "now",
    "prefixes",
    "after",
    "turn_limit",
    "namespaces",
    "namespace_patterns",
    "max_attempts",
    "event_types",
    "max_events",
    "worker_id",
    "lease",
    "ignore_stale",
    "max_bytes",
)


@pytest.fixture
async def fresh_url(migrated_url: str) -> AsyncIterator[str]:
    async with own_database(migrated_url, prefix="inboxd_plans") as url:
        yield url


@pytest.fixture(scope="module")
async def backlog_url(migrated_url: str) -> AsyncIterator[str]:
    """A fresh database: BACKLOG due PENDING events in tenant-a/busy, one in each of OTHER_NAMESPACES more."""
    async with own_database(migrated_url, prefix="inboxd_plans") as url:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await load_backlog(conn, "tenant-a/busy")
            await conn.execute(
                "INSERT INTO inbox_events (namespace, event_key, event_type, payload, accepted_at, available_at,"
                " due_at, updated_at) VALUES ('tenant-b/delayed', 'later', 'test.event', '{}', now(),"
                " now() + interval '1 day', now() + interval '1 day', now())"
            )
            # Many other tenants with open work: a token's patterns must not walk them all either.
            await conn.execute(
                "INSERT INTO inbox_events (namespace, event_key, event_type, payload, accepted_at, available_at,"
                " due_at, updated_at) SELECT format('tenant-z/%%s', i), 'k', 'test.event', '{}', now(), now(),"
                " now(), now() FROM generate_series(1, %s) AS i",
                (OTHER_NAMESPACES,),
            )
            await conn.execute("ANALYZE inbox_events")
        yield url


def _prepared(query: str, parameters: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """A named query with $n placeholders, for PREPARE, and the parameter name of each n."""
    text, names = numbered(query)
    assert set(names) == set(parameters), f"the parameters of {query} changed: {sorted(names)}"
    return text, names


def _walk(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from _walk(child)


def rows_read(plan: dict[str, Any]) -> int:
    """Rows every scan of inbox_events produced or filtered away, over all its loops."""
    total = 0
    for node in _walk(plan["Plan"]):
        if node.get("Relation Name") == "inbox_events":
            loops = node.get("Actual Loops", 1)
            produced = node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)
            total += int(produced * loops) + node.get("Rows Removed by Index Recheck", 0)
    return total


def buffers_read(plan: dict[str, Any]) -> int:
    top = plan["Plan"]
    return int(top.get("Shared Hit Blocks", 0) + top.get("Shared Read Blocks", 0))


async def explain_claim(
    conn: Any, plan_cache_mode: str, *, query: str = "event_claim", **request: Any
) -> dict[str, Any]:
    """EXPLAIN ANALYZE of one execution of the prepared claim (`query`), rolled back."""
    values = {
        "now": None,
        "namespaces": [],
        "namespace_patterns": [],
        "prefixes": [],
        "after": "",
        "turn_limit": 26,
        "max_attempts": 10,
        "event_types": [],
        "max_events": 10,
        "worker_id": "w",
        "lease": timedelta(seconds=30),
        "ignore_stale": True,
        "max_bytes": CLAIM_ANSWER_BYTES,
        **request,
    }
    wanted = tuple(name for name in _PARAMETERS if name in numbered(query)[1])
    return await explain_prepared(conn, plan_cache_mode, query, wanted, values)


async def explain_prepared(
    conn: Any, plan_cache_mode: str, query: str, parameters: tuple[str, ...], values: dict[str, Any]
) -> dict[str, Any]:
    async with conn.transaction(force_rollback=True):
        await conn.execute(f"SET LOCAL plan_cache_mode = {plan_cache_mode}")
        text, names = _prepared(query, parameters)
        await conn.execute("PREPARE planned AS " + text)
        placeholders = ", ".join(["%s"] * len(names))
        cur = psycopg.AsyncClientCursor(conn)
        arguments = [values[name] for name in names]
        # Once before, undone: a statement that calls a PL/pgSQL function (the claim's turn, migration
        # 0024) reads the catalogs to compile it at its first call in a session, not at each execution.
        await conn.execute("SAVEPOINT warm")
        await cur.execute(f"EXECUTE planned({placeholders})", arguments)
        await conn.execute("ROLLBACK TO SAVEPOINT warm")
        await cur.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE planned({placeholders})", arguments)
        row = await cur.fetchone()
        assert row is not None
        await conn.execute("DEALLOCATE planned")
    document = row[0] if isinstance(row[0], list) else json.loads(row[0])
    plan: dict[str, Any] = document[0]
    return plan


async def load_backlog(conn: Any, namespace: str) -> None:
    """One namespace with BACKLOG PENDING events, all due, in one statement."""
    await conn.execute(
        "INSERT INTO inbox_events (namespace, event_key, event_type, payload, accepted_at, available_at,"
        " due_at, updated_at)"
        " SELECT %s, 'k' || i, 'test.event', '{}', now() - interval '1 hour', now() - interval '1 hour',"
        "        now() - interval '1 hour' + i * interval '1 ms', now()"
        " FROM generate_series(1, %s) AS i",
        (namespace, BACKLOG),
    )
    await conn.execute("ANALYZE inbox_events")


CLAIM_SHAPES: dict[str, dict[str, Any]] = {
    "one namespace": {"namespaces": ["tenant-b/empty"]},
    "several namespaces": {"namespaces": ["tenant-b/empty", "tenant-c/empty"]},
    "several namespaces and a type": {"namespaces": ["tenant-b/empty", "tenant-c/x"], "event_types": ["test.event"]},
    "a token's namespace patterns": {"namespace_patterns": ["tenant-b/%"], "prefixes": ["tenant-b/"]},
}


@pytest.mark.parametrize("plan_cache_mode", ["force_generic_plan", "force_custom_plan"])
@pytest.mark.parametrize("shape", sorted(CLAIM_SHAPES))
async def test_a_claim_on_an_empty_namespace_reads_a_bounded_number_of_rows_beside_a_backlog(
    backlog_url: str, plan_cache_mode: str, shape: str
) -> None:
    async with await psycopg.AsyncConnection.connect(backlog_url, autocommit=True) as conn:
        plan = await explain_claim(conn, plan_cache_mode, **CLAIM_SHAPES[shape])
    assert rows_read(plan) < BOUND, json.dumps(plan["Plan"], indent=1)[:4000]
    assert buffers_read(plan) < BOUND, json.dumps(plan["Plan"], indent=1)[:4000]


@pytest.mark.parametrize("plan_cache_mode", ["force_generic_plan", "force_custom_plan"])
async def test_the_plain_claim_of_one_empty_namespace_reads_a_bounded_number_of_rows_beside_a_backlog(
    backlog_url: str, plan_cache_mode: str
) -> None:
    # The statement a Claim of one named namespace runs first (store/claims.py), no rule governing it.
    async with await psycopg.AsyncConnection.connect(backlog_url, autocommit=True) as conn:
        plan = await explain_claim(conn, plan_cache_mode, query="event_claim_one", namespaces=["tenant-b/empty"])
    assert rows_read(plan) < BOUND, json.dumps(plan["Plan"], indent=1)[:4000]
    assert buffers_read(plan) < BOUND, json.dumps(plan["Plan"], indent=1)[:4000]


@pytest.mark.parametrize("plan_cache_mode", ["force_generic_plan", "force_custom_plan"])
async def test_a_claim_over_every_namespace_reads_only_what_it_takes(backlog_url: str, plan_cache_mode: str) -> None:
    async with await psycopg.AsyncConnection.connect(backlog_url, autocommit=True) as conn:
        plan = await explain_claim(conn, plan_cache_mode, max_events=10, prefixes=[""])
    assert rows_read(plan) < BOUND, json.dumps(plan["Plan"], indent=1)[:4000]


_POLL_PARAMETERS = (
    "prefixes",
    "patterns",
    "namespaces",
    "event_types",
    "pattern_types",
    "now",
    "cap",
    "anywhere_types",
    "ignore_stale",
)
POLL_SHAPES = {
    "waiters on named namespaces": {"namespaces": ["tenant-b/empty", "tenant-c/x"], "event_types": ["", "test.event"]},
    "waiters narrowed by patterns": {"patterns": ["tenant-b/%"], "pattern_types": [""], "prefixes": ["tenant-b/"]},
}


@pytest.mark.parametrize("plan_cache_mode", ["force_generic_plan", "force_custom_plan"])
@pytest.mark.parametrize("shape", sorted(POLL_SHAPES))
async def test_the_wake_up_poll_for_empty_namespaces_reads_a_bounded_number_of_rows_beside_a_backlog(
    backlog_url: str, plan_cache_mode: str, shape: str
) -> None:
    values = {
        "prefixes": [],
        "patterns": [],
        "namespaces": [],
        "event_types": [],
        "pattern_types": [],
        "now": None,
        "cap": 100,
        "anywhere_types": [],
        "ignore_stale": True,
        **POLL_SHAPES[shape],
    }
    async with await psycopg.AsyncConnection.connect(backlog_url, autocommit=True) as conn:
        plan = await explain_prepared(conn, plan_cache_mode, "event_due_kinds", _POLL_PARAMETERS, values)
    assert rows_read(plan) < BOUND, json.dumps(plan["Plan"], indent=1)[:4000]
    assert buffers_read(plan) < BOUND, json.dumps(plan["Plan"], indent=1)[:4000]


async def test_a_fresh_migrate_leaves_every_table_analyzed(fresh_url: str) -> None:
    async with await psycopg.AsyncConnection.connect(fresh_url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT relname, reltuples FROM pg_class"
            " WHERE relname IN ('inbox_events', 'inbox_claims', 'inbox_actions', 'inbox_conflicts', 'inbox_replays')"
        )
        reltuples: dict[str, float] = dict(await cur.fetchall())
    assert len(reltuples) == 5
    # -1 means "never analyzed": the planner would guess 10 pages' worth of rows.
    assert all(value >= 0 for value in reltuples.values()), reltuples


TENANTS = 10_000


@pytest.fixture(scope="module")
async def tenants_url(migrated_url: str) -> AsyncIterator[str]:
    """A fresh database: TENANTS namespaces with three due events each (issue 28's ten thousand tenants)."""
    async with own_database(migrated_url, prefix="inboxd_plans") as url:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(
                "INSERT INTO inbox_events (namespace, event_key, event_type, payload, accepted_at, available_at,"
                " due_at, updated_at) SELECT format('tenant/%%s', t), 'k' || i, 'test.event', '{}', now(), now(),"
                " now() - interval '1 hour' + (t * 3 + i) * interval '1 ms', now()"
                " FROM generate_series(1, %s) AS t, generate_series(1, 3) AS i",
                (TENANTS,),
            )
            await conn.execute("ANALYZE inbox_events")
        yield url


@pytest.mark.parametrize("plan_cache_mode", ["force_generic_plan", "force_custom_plan"])
@pytest.mark.parametrize(
    "shape",
    [{"prefixes": [""]}, {"namespace_patterns": ["tenant/%"], "prefixes": ["tenant/"]}],
    ids=["every namespace", "a pattern"],
)
async def test_a_fair_claim_over_ten_thousand_tenants_reads_a_bounded_number_of_rows(
    tenants_url: str, plan_cache_mode: str, shape: dict[str, Any]
) -> None:
    """One turn walks max_events + TURN_SLACK namespaces and takes one event from each of ten: never all 10,000."""
    async with await psycopg.AsyncConnection.connect(tenants_url, autocommit=True) as conn:
        plan = await explain_claim(conn, plan_cache_mode, max_events=10, after="tenant/5000", **shape)
    assert rows_read(plan) < BOUND, json.dumps(plan["Plan"], indent=1)[:4000]
    assert buffers_read(plan) < 10 * BOUND, json.dumps(plan["Plan"], indent=1)[:4000]
