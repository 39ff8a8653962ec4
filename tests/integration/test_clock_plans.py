"""Every statement reads now through inboxd_now, and the planner inlines it: a cut-off stays an index condition.

inboxd_now(%(now)s) (migration 0011) is the caller's clock when given, else
the database's. Written as a function, it costs nothing only while the
planner inlines it into coalesce($n, now()): a function declared STRICT, in
plpgsql, with a SET clause or SECURITY DEFINER is called instead, once per
row where a statement writes a timestamp; declared VOLATILE as well, it is
no index condition any more, and a Claim over many delayed events reads all
of them. Plans come from PREPAREd statements under a generic and a custom
plan, as in test_claim_plans.py: counts of rows, never times.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any, LiteralString

import psycopg
import pytest

from inboxd.store.queries import QUERIES, numbered
from inboxd.usecases.inbox import CLAIM_ANSWER_BYTES
from tests.integration.helpers import own_database
from tests.integration.test_claim_plans import _walk, buffers_read, explain_prepared, rows_read

PLAN_CACHE_MODES = ["force_generic_plan", "force_custom_plan"]
# Per namespace: enough that reading them is plain in a count of rows.
ROWS = 2_000
CLOCKED = sorted(name for name, statement in QUERIES.items() if "inboxd_now(" in statement)


def test_no_statement_reads_the_database_clock_but_through_inboxd_now() -> None:
    functions = r"\b(now|transaction_timestamp|statement_timestamp|clock_timestamp)\s*\("
    spelled = re.compile(functions + r"|\bcurrent_timestamp\b", re.I)
    assert [name for name, statement in QUERIES.items() if spelled.search(statement)] == []
    # What the other tests here look at: the statements with a cut-off, and the work path's writes.
    assert {"event_claim", "event_due_kinds", "event_rescue_expired", "event_complete_many"} <= set(CLOCKED)


async def verbose_plan(conn: Any, plan_cache_mode: str, name: str, now: datetime) -> tuple[str, int]:
    """EXPLAIN VERBOSE of the prepared statement with `now` given and every other parameter NULL, and now's $n."""
    text, names = numbered(name)
    async with conn.transaction(force_rollback=True):
        await conn.execute(f"SET LOCAL plan_cache_mode = {plan_cache_mode}")
        await conn.execute("PREPARE clocked AS " + text)
        try:
            cur = psycopg.AsyncClientCursor(conn)
            await cur.execute(
                f"EXPLAIN (VERBOSE) EXECUTE clocked({', '.join(['%s'] * len(names))})",
                [now if n == "now" else None for n in names],
            )
            plan = "\n".join(row[0] for row in await cur.fetchall())
        finally:
            await conn.execute("DEALLOCATE clocked")
    return plan, names.index("now") + 1


@pytest.mark.parametrize("plan_cache_mode", PLAN_CACHE_MODES)
@pytest.mark.parametrize("name", CLOCKED)
async def test_the_planner_inlines_inboxd_now_into_every_statement(
    migrated_url: str, name: str, plan_cache_mode: str
) -> None:
    async with await psycopg.AsyncConnection.connect(migrated_url, autocommit=True) as conn:
        plan, number = await verbose_plan(conn, plan_cache_mode, name, datetime.now(UTC))
    assert "inboxd_now(" not in plan, f"{name}: inboxd_now is called, not inlined\n{plan}"
    if plan_cache_mode == "force_generic_plan":
        # A custom plan folds the given clock into a constant; a generic one keeps the expression.
        assert f"COALESCE(${number}, now())" in plan, plan


# ROWS events in each namespace, none of them past a cut-off: delayed a day,
# leased for a day, completed just now.
NOT_YET: tuple[LiteralString, ...] = (
    "INSERT INTO inbox_events (namespace, event_key, event_type, payload, accepted_at, available_at, due_at,"
    " updated_at) SELECT 'clock/delayed', 'k' || i, 'test.event', '{}', now(), now() + interval '1 day',"
    " now() + interval '1 day', now() FROM generate_series(1, %s) AS i",
    "INSERT INTO inbox_events (namespace, event_key, event_type, payload, state, attempt, claim_token, fencing_token,"
    " accepted_at, available_at, due_at, lease_expires_at, updated_at) SELECT 'clock/leased', 'k' || i, 'test.event',"
    " '{}', 'processing', 1, 't' || i, nextval('inbox_fencing_tokens'), now(), now(), now() + interval '1 day',"
    " now() + interval '1 day', now() FROM generate_series(1, %s) AS i",
    "INSERT INTO inbox_events (namespace, event_key, event_type, payload, state, attempt, claim_token, fencing_token,"
    " accepted_at, available_at, completed_at, disposition, updated_at) SELECT 'clock/done', 'k' || i, 'test.event',"
    " '{}', 'completed', 1, 't' || i, nextval('inbox_fencing_tokens'), now(), now(), now(), 'applied', now()"
    " FROM generate_series(1, %s) AS i",
)


@pytest.fixture(scope="module")
async def not_yet_url(migrated_url: str) -> AsyncIterator[str]:
    """A fresh database where nothing is past a cut-off yet."""
    async with own_database(migrated_url, prefix="inboxd_plans") as url:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            for insert in NOT_YET:
                await conn.execute(insert, (ROWS,))
            await conn.execute("ANALYZE inbox_events")
        yield url


NAMESPACES = ["clock/delayed", "clock/leased"]
CLAIM = {
    "prefixes": [],
    "after": "",
    "turn_limit": 26,
    "namespace_patterns": [],
    "max_attempts": 10,
    "event_types": [],
    "ignore_stale": True,
    "max_events": 10,
    "worker_id": "w",
    "lease": timedelta(seconds=30),
    "max_bytes": CLAIM_ANSWER_BYTES,
}
POLL = {"prefixes": [], "patterns": [], "pattern_types": [], "cap": 100, "ignore_stale": True}
# Each statement with a cut-off, and its parameters but the clock, when nothing is past its cut-off yet.
CUT_OFFS: dict[str, tuple[str, dict[str, Any]]] = {
    "claim from named namespaces": ("event_claim", {**CLAIM, "namespaces": NAMESPACES}),
    "claim from every namespace": ("event_claim", {**CLAIM, "namespaces": [], "prefixes": [""]}),
    "wake-up poll": (
        "event_due_kinds",
        {**POLL, "namespaces": NAMESPACES, "event_types": ["", ""], "anywhere_types": [""]},
    ),
    "lease rescuer": (
        "event_rescue_expired",
        {"max_attempts": 10, "grace": timedelta(0), "namespace": None, "batch_size": 100},
    ),
    "retention": (
        "event_delete_completed",
        {"retention": timedelta(hours=1), "namespace": None, "batch_size": 100},
    ),
    "payload retention": (
        "retention_drop_payloads",
        {"payload_retention": timedelta(hours=1), "namespace": None, "batch_size": 100},
    ),
}
CLOCKS = {"the database's clock": None, "the caller's clock": datetime.now(UTC)}


@pytest.mark.parametrize("clock", sorted(CLOCKS))
@pytest.mark.parametrize("plan_cache_mode", PLAN_CACHE_MODES)
@pytest.mark.parametrize("case", sorted(CUT_OFFS))
async def test_a_statement_with_nothing_past_its_cut_off_reads_no_rows(
    not_yet_url: str, case: str, plan_cache_mode: str, clock: str
) -> None:
    name, values = CUT_OFFS[case]
    values = {**values, "now": CLOCKS[clock]}
    async with await psycopg.AsyncConnection.connect(not_yet_url, autocommit=True) as conn:
        plan = await explain_prepared(conn, plan_cache_mode, name, tuple(values), values)
        cur = await conn.execute("SELECT count(DISTINCT namespace) FROM inbox_events")
        row = await cur.fetchone()
        assert row is not None
    walked = namespace_walk_rows(plan)
    assert rows_read(plan) - walked == 0, f"{case}: the cut-off is no index condition\n{plan['Plan']}"
    # A Claim over every namespace walks the namespaces that have open events, one index entry each
    # (and one more to find the walk's end): never their events.
    assert walked <= row[0] + 2, f"{case}: the walk read more than one entry per namespace\n{plan['Plan']}"
    if name == "event_claim":
        # The turn's walk and probes run inside inboxd_claim_turn, whose rows EXPLAIN does not show: its
        # buffers count under the statement's. Reading each not-yet-due row would be dozens of pages.
        assert buffers_read(plan) < 60, f"{case}: the turn read past its cut-off\n{plan['Plan']}"


def namespace_walk_rows(plan: dict[str, Any]) -> int:
    """Rows the claim statement's walk of the namespaces read: index-only scans that name no due_at."""
    total = 0
    for node in _walk(plan["Plan"]):
        if node.get("Node Type") == "Index Only Scan" and "due_at" not in node.get("Index Cond", ""):
            total += int(node.get("Actual Rows", 0) * node.get("Actual Loops", 1))
    return total
