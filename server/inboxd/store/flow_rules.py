"""Flow-control rules in PostgreSQL: change one (audited, in the caller's transaction), read them, and their figures.

A change takes its pattern's turn (an advisory lock, so two creations of
one pattern cannot both find no rule), reads the rule under its lock, lets
`inboxd.domain.flow_rules` apply the change, and writes the rule with its
audit row in one statement. The claim statement reads the same table on
every replica, so a committed change binds every Claim from then on.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from inboxd.domain.flow_rules import (
    RECENT_CHANGES,
    FlowChange,
    FlowChangeRecord,
    FlowFigures,
    FlowRule,
    RuleChanged,
    changed_rule,
    in_words,
)
from inboxd.domain.namespace_patterns import like_prefix
from inboxd.store.database import Connection
from inboxd.store.queries import QUERIES


def _rule(row: tuple[Any, ...]) -> FlowRule:
    pattern, max_in_flight, rate, burst, paused, weight, resumed_at, ramp, ramp_rate, updated_at, updated_by = row
    return FlowRule(
        pattern=pattern,
        max_in_flight=max_in_flight,
        rate=rate,
        burst=burst,
        paused=paused,
        weight=weight,
        resumed_at=resumed_at,
        ramp=ramp,
        ramp_rate=ramp_rate,
        updated_at=updated_at,
        updated_by=updated_by,
    )


async def _one_rule(conn: Connection, query: str, params: dict[str, Any]) -> FlowRule | None:
    row = await (await conn.execute(QUERIES[query], params)).fetchone()
    return None if row is None else _rule(row)


async def set_rule(conn: Connection, change: FlowChange, *, actor: str, now: datetime | None = None) -> RuleChanged:
    """Creates, changes or removes the rule of `change.pattern`, with its audit row; NotFound removing none."""
    await conn.execute(QUERIES["flow_rule_lock"], {"pattern": change.pattern})
    before = await _one_rule(conn, "flow_rule_read", {"pattern": change.pattern})
    clock = await (await conn.execute(QUERIES["flow_clock"], {"now": now})).fetchone()
    assert clock is not None
    at: datetime = clock[0]
    after = changed_rule(before, change, now=at, actor=actor)
    audit = {
        "pattern": change.pattern,
        "actor": actor,
        "reason": change.reason,
        "before": in_words(before),
        "after": in_words(after),
        "at": at,
    }
    if after is None:
        query = "flow_rule_delete"
        params = audit
    else:
        query = "flow_rule_insert" if before is None else "flow_rule_update"
        params = audit | {
            "like_pattern": after.like_pattern,
            "is_pattern": after.is_pattern,
            "specificity": after.specificity,
            "max_in_flight": after.max_in_flight,
            "rate": after.rate,
            "burst": after.burst,
            "paused": after.paused,
            "weight": after.weight,
            "resumed_at": after.resumed_at,
            "ramp": after.ramp,
            "ramp_rate": after.ramp_rate,
        }
    written = await (await conn.execute(QUERIES[query], params)).fetchone()
    assert written is not None, "the locked rule vanished inside its own change"
    return RuleChanged(before, after)


async def find_rule(conn: Connection, pattern: str) -> FlowRule | None:
    """The rule with exactly this pattern, or None."""
    return await _one_rule(conn, "flow_rule_find", {"pattern": pattern})


async def governing_rule(conn: Connection, namespace: str) -> FlowRule | None:
    """The rule that governs `namespace` (its own, else the most specific pattern), or None."""
    return await _one_rule(conn, "flow_rule_governing", {"namespace": namespace})


async def list_rules(conn: Connection) -> list[FlowRule]:
    """Every rule, most specific first."""
    cur = await conn.execute(QUERIES["flow_rule_list"])
    return [_rule(row) for row in await cur.fetchall()]


async def recent_changes(conn: Connection, pattern: str, limit: int = RECENT_CHANGES) -> tuple[FlowChangeRecord, ...]:
    """The pattern's audited changes, newest first."""
    cur = await conn.execute(QUERIES["flow_changes_recent"], {"pattern": pattern, "limit": limit})
    return tuple(FlowChangeRecord(*row) for row in await cur.fetchall())


def _figures(row: tuple[Any, ...] | None) -> FlowFigures:
    assert row is not None, "an aggregate answers one row"
    namespaces, in_flight, pending = row
    return FlowFigures(int(namespaces), int(in_flight), int(pending))


async def rule_figures(conn: Connection, rule: FlowRule) -> FlowFigures:
    """Over the namespaces the rule governs that have open events: how many, their leased and PENDING events."""
    if not rule.is_pattern:
        # A namespace's own rule governs it alone (nothing outranks it); a skip scan from its name as a
        # prefix would walk every namespace it begins ("mailera" -> "mailera/...").
        return await namespace_figures(conn, rule.pattern)
    like = rule.like_pattern
    params = {"pattern": rule.pattern, "like_pattern": like, "prefix": like_prefix(like)}
    return _figures(await (await conn.execute(QUERIES["flow_rule_figures"], params)).fetchone())


async def namespace_figures(conn: Connection, namespace: str) -> FlowFigures:
    """One namespace's figures (namespaces: 1 when it has open events, else 0)."""
    return _figures(await (await conn.execute(QUERIES["flow_namespace_figures"], {"namespace": namespace})).fetchone())
