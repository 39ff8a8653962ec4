"""The claim query's plan, as PostgreSQL may pick it: EXPLAIN ANALYZE of the prepared statement, generic or custom.

psycopg prepares a statement after five executions on a connection, and
PostgreSQL may then switch to a generic plan, one made without the parameter
values. So the claim is prepared here exactly as psycopg prepares it (same
text, same parameter types), and run with EXPLAIN (ANALYZE, BUFFERS) under
`plan_cache_mode = force_generic_plan` or `force_custom_plan`, in a
transaction rolled back afterwards.
"""

from __future__ import annotations

from typing import Any, LiteralString

import psycopg
from psycopg import sql

from bench.raw import claim_params, claim_query

MODES: dict[str, LiteralString] = {
    "generic": "SET LOCAL plan_cache_mode = force_generic_plan",
    "custom": "SET LOCAL plan_cache_mode = force_custom_plan",
}


async def explain_claim(url: str, namespace: str, max_events: int, mode: str) -> dict[str, Any]:
    """Execution time, rows read by the scans, buffers, and the plan as text, for one claim on `namespace`."""
    name, query = claim_query(namespace)
    params = claim_params(namespace, max_events, "explain")
    async with await psycopg.AsyncConnection.connect(url) as conn:
        await conn.execute(MODES[mode])
        await conn.execute(query, params, prepare=True)
        cur = await conn.execute(
            "SELECT name, parameter_types::text[] FROM pg_prepared_statements WHERE NOT from_sql "
            "AND statement LIKE '%%inbox_events%%' ORDER BY prepare_time DESC LIMIT 1"
        )
        row = await cur.fetchone()
        if row is None:
            raise RuntimeError("the claim query was not prepared; cannot explain its generic plan")
        statement, types = str(row[0]), list(row[1])
        # The values in the order psycopg numbered them: first appearance of each name.
        values = list(params.values())
        args = sql.SQL(", ").join(
            sql.SQL("{}::{}").format(sql.Literal(v), sql.SQL(t)) for v, t in zip(values, types, strict=True)
        )
        explain = sql.SQL("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE {}({})").format(
            sql.Identifier(statement), args
        )
        cur = await conn.execute(explain)
        found = await cur.fetchone()
        await conn.rollback()
    assert found is not None
    doc = found[0][0]
    plan = doc["Plan"]
    return {
        "mode": mode,
        "query": name,
        "execution_ms": round(float(doc["Execution Time"]), 3),
        # The statement's answer: one row per event claimed (one row of NULLs when none was).
        "rows_out": int(plan.get("Actual Rows", 0)),
        "planning_ms": round(float(doc.get("Planning Time", 0.0)), 3),
        "rows_read": rows_read(plan),
        "buffers": int(plan.get("Shared Hit Blocks", 0)) + int(plan.get("Shared Read Blocks", 0)),
        "plan": "\n".join(plan_lines(plan)),
    }


def rows_read(node: dict[str, Any]) -> int:
    """Rows every scan of a table produced or filtered out, times its loops: what the claim had to look at."""
    total = 0
    if "Relation Name" in node and "Scan" in str(node.get("Node Type", "")):
        seen = float(node.get("Actual Rows", 0)) + float(node.get("Rows Removed by Filter", 0))
        seen += float(node.get("Rows Removed by Index Recheck", 0))
        total += round(seen * float(node.get("Actual Loops", 1)))
    for child in node.get("Plans", []):
        total += rows_read(child)
    return total


def plan_lines(node: dict[str, Any], depth: int = 0) -> list[str]:
    what = str(node.get("Node Type", "?"))
    if "Index Name" in node:
        what += f" using {node['Index Name']}"
    if "Relation Name" in node:
        what += f" on {node['Relation Name']}"
    if "CTE Name" in node:
        what += f" ({node['CTE Name']})"
    facts = f"rows={node.get('Actual Rows', 0)} loops={node.get('Actual Loops', 0)}"
    if node.get("Rows Removed by Filter"):
        facts += f" removed by filter={node['Rows Removed by Filter']}"
    facts += f" time={node.get('Actual Total Time', 0)} ms"
    lines = [f"{'  ' * depth}-> {what}  ({facts})"]
    for child in node.get("Plans", []):
        lines += plan_lines(child, depth + 1)
    return lines
