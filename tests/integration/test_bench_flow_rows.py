"""Issue 28's benchmark writes rules the schema takes and reads the ledger the claims write.

The flow figures are only what they say if the rules the benchmark writes
straight into inbox_flow_rules are the rules a Claim reads (the most
specific wins, the drain's "other" rules govern none of its namespace), and
if both claim statements it compares run on today's schema. Each test runs
the benchmark's own code against a database of the module's own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import psycopg
import pytest

from bench import flow_ledger as ledger
from bench import raw
from bench.phases.claim import CLAIM_NS, prefill
from bench.phases.flow import EVENTS_PER_NAMESPACE, PREFILL_MANY, other_rules
from bench.phases.flow_baseline import baseline_statement, claim_complete_steps, current_statement
from bench.workload import EVENT_TYPE, PAYLOAD_BYTES
from tests.integration.helpers import own_database


@pytest.fixture(scope="module")
async def url(migrated_url: str) -> AsyncIterator[str]:
    """One database for the module: each test writes namespaces of its own."""
    async with own_database(migrated_url, prefix="inboxd_bench_flow") as own:
        yield own


async def rule_of(url: str, namespace: str) -> str | None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        row = await (await conn.execute("SELECT pattern FROM inboxd_flow_rule(%s)", (namespace,))).fetchone()
    return None if row is None else str(row[0])


async def test_the_benchmarks_rules_are_the_ones_a_claim_reads_and_none_governs_the_drained_namespace(
    url: str,
) -> None:
    await ledger.set_rules(url, other_rules(20))
    await ledger.set_rules(url, [ledger.rule_row("bench/claim-x", max_in_flight=1)])
    assert await rule_of(url, CLAIM_NS) is None
    # A name's own rule above the pattern that also matches it; the pattern for its other neighbours.
    assert await rule_of(url, "bench/claim-x") == "bench/claim-x"
    assert await rule_of(url, "bench/claim-y") == "bench/claim-*"
    assert await rule_of(url, "bench/other-3") == "bench/other-3"
    await ledger.clear_rules(url)
    assert await rule_of(url, "bench/claim-x") is None


async def test_both_compared_claim_statements_run_and_the_ledger_reads_what_they_claimed(url: str) -> None:
    await prefill(url, 30, "flow-test", namespace="bench/flow-one")
    before = await ledger.db_now(url)
    async with raw.connections(url, 1) as conns:
        for statement in (current_statement(), baseline_statement()):
            (step,) = claim_complete_steps(conns, statement, "bench/flow-one", 10)
            assert await step() == 10
    rows = await ledger.ledger(url, ["bench/flow-one"])
    assert len(rows) == 20 and all(ns == "bench/flow-one" and end is not None for ns, _at, end in rows)
    assert ledger.max_overlap([(at, end) for _ns, at, end in rows]) == 10
    assert all(at >= before for _ns, at, _end in rows)


async def test_the_plan_figures_backlog_is_spread_over_its_namespaces(url: str) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        params = {"n": 50, "total": 50 * EVENTS_PER_NAMESPACE, "prefix": "t-", "event_type": EVENT_TYPE}
        await conn.execute(PREFILL_MANY, {**params, "payload": PAYLOAD_BYTES})
        cur = await conn.execute(
            "SELECT count(DISTINCT namespace), min(c), max(c) FROM (SELECT namespace, count(*) AS c FROM inbox_events"
            " WHERE namespace LIKE 'bench/flow-many/%%' AND due_at <= now() GROUP BY namespace) AS n"
        )
        assert await cur.fetchone() == (50, EVENTS_PER_NAMESPACE, EVENTS_PER_NAMESPACE)


async def test_the_explained_claim_over_every_namespace_hands_out_what_it_asks_for(url: str) -> None:
    from bench.plans import explain_claim

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        params = {"n": 40, "total": 40 * EVENTS_PER_NAMESPACE, "prefix": "e-", "event_type": EVENT_TYPE}
        await conn.execute(PREFILL_MANY, {**params, "payload": PAYLOAD_BYTES})
    # Rolled back: the namespaces' events are still due after it.
    generic = await explain_claim(url, "", 10, "generic")
    assert generic["rows_out"] == 10 and generic["rows_read"] > 0
