"""Flow control's live figures read index ranges of what a rule governs, never the table, beside a backlog.

As in test_claim_plans.py: a database of the module's own, the statements
PREPAREd and EXPLAINed (ANALYZE, BUFFERS) under both plan cache modes,
counting rows, never timing.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import psycopg
import pytest

from inboxd.domain.namespace_patterns import grant_to_like, like_prefix
from tests.integration.helpers import own_database
from tests.integration.test_claim_plans import explain_prepared, rows_read

BACKLOG = 20_000
OTHER_NAMESPACES = 200
# Generous for a rule that governs no namespace with open events: a few index probes.
BOUND = 100
MODES = ["force_generic_plan", "force_custom_plan"]


@pytest.fixture(scope="module")
async def backlog_url(migrated_url: str) -> AsyncIterator[str]:
    """BACKLOG open events in tenant-a/busy, one in each of OTHER_NAMESPACES tenant-z/ namespaces, rules on them."""
    async with own_database(migrated_url, prefix="inboxd_flow_plans") as url:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(
                "INSERT INTO inbox_events (namespace, event_key, event_type, payload, accepted_at, available_at,"
                " due_at, updated_at) SELECT 'tenant-a/busy', 'k' || i, 'test.event', '{}', now(), now(), now(),"
                " now() FROM generate_series(1, %s) AS i",
                (BACKLOG,),
            )
            await conn.execute(
                "INSERT INTO inbox_events (namespace, event_key, event_type, payload, accepted_at, available_at,"
                " due_at, updated_at) SELECT format('tenant-z/%%s', i), 'k', 'test.event', '{}', now(), now(),"
                " now(), now() FROM generate_series(1, %s) AS i",
                (OTHER_NAMESPACES,),
            )
            for pattern in ("tenant-b/*", "tenant-z/*", "tenant-a/busy"):
                await conn.execute(
                    "INSERT INTO inbox_flow_rules (pattern, like_pattern, is_pattern, specificity, updated_at,"
                    " updated_by) VALUES (%s, %s, %s, 0, now(), 'test')",
                    (pattern, grant_to_like(pattern), "*" in pattern),
                )
            await conn.execute("VACUUM ANALYZE inbox_events")
        yield url


def rule_values(pattern: str) -> dict[str, str]:
    like = grant_to_like(pattern)
    return {"pattern": pattern, "like_pattern": like, "prefix": like_prefix(like)}


@pytest.mark.parametrize("plan_cache_mode", MODES)
async def test_a_rule_over_namespaces_without_events_reads_a_bounded_number_of_rows_beside_a_backlog(
    backlog_url: str, plan_cache_mode: str
) -> None:
    values = rule_values("tenant-b/*")
    async with await psycopg.AsyncConnection.connect(backlog_url, autocommit=True) as conn:
        plan = await explain_prepared(conn, plan_cache_mode, "flow_rule_figures", tuple(values), values)
    assert rows_read(plan) < BOUND, json.dumps(plan["Plan"], indent=1)[:4000]


@pytest.mark.parametrize("plan_cache_mode", MODES)
async def test_a_rule_over_many_namespaces_reads_each_ones_index_range_and_not_the_others_backlog(
    backlog_url: str, plan_cache_mode: str
) -> None:
    values = rule_values("tenant-z/*")
    async with await psycopg.AsyncConnection.connect(backlog_url, autocommit=True) as conn:
        plan = await explain_prepared(conn, plan_cache_mode, "flow_rule_figures", tuple(values), values)
    # A probe and two counts of one row per namespace it governs: nothing of tenant-a/busy's backlog.
    assert rows_read(plan) < 5 * OTHER_NAMESPACES + BOUND, json.dumps(plan["Plan"], indent=1)[:4000]


@pytest.mark.parametrize("plan_cache_mode", MODES)
async def test_one_namespaces_figures_read_only_its_own_rows(backlog_url: str, plan_cache_mode: str) -> None:
    async with await psycopg.AsyncConnection.connect(backlog_url, autocommit=True) as conn:
        plan = await explain_prepared(
            conn, plan_cache_mode, "flow_namespace_figures", ("namespace",), {"namespace": "tenant-z/7"}
        )
    assert rows_read(plan) < BOUND, json.dumps(plan["Plan"], indent=1)[:4000]
