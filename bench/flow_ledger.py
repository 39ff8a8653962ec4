"""Issue 28's counts, read from the claims ledger (inbox_claims), and the flow rules the benchmark sets.

Every flow-control figure is a count of what PostgreSQL recorded, not a
timer: who was handed what before whom (fairness), how many leases of one
namespace overlapped (max_in_flight), how many claims fell in a window
(rate). The arithmetic is plain functions of ledger rows, so a unit test can
check it on made-up intervals.

A ledger time is its statement's `now()`, the start of its transaction, not
the moment it committed: two intervals that touch may look as if they
overlapped by the length of a statement. So beside the most leases held at
once, `time_above` says for how long the count stood above a limit: a
microsecond-wide excess is that skew, a real one lasts a round trip.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, LiteralString

import psycopg

from inboxd.domain.namespace_patterns import grant_to_like

# An interval of the ledger in seconds (epoch): claimed_at, and ended_at or None while still held.
Interval = tuple[float, float | None]

LEDGER: LiteralString = """
SELECT namespace, extract(epoch FROM claimed_at)::float8, extract(epoch FROM ended_at)::float8
FROM inbox_claims WHERE namespace = ANY(%(namespaces)s::text[]) ORDER BY claimed_at, fencing_token
"""

# A rule as SetFlowControl would write it (migration 0021), until the admin RPC lands: its LIKE form
# is the tokens' translation, and its specificity ranks a name above any pattern, then patterns by
# their literal characters.
UPSERT_RULE: LiteralString = """
INSERT INTO inbox_flow_rules (pattern, like_pattern, is_pattern, specificity, max_in_flight, rate, burst,
                              paused, weight, updated_at, updated_by)
VALUES (%(pattern)s, %(like_pattern)s, %(is_pattern)s, %(specificity)s, %(max_in_flight)s, %(rate)s, %(burst)s,
        %(paused)s, %(weight)s, now(), 'bench')
ON CONFLICT (pattern) DO UPDATE SET like_pattern = excluded.like_pattern, is_pattern = excluded.is_pattern,
    specificity = excluded.specificity, max_in_flight = excluded.max_in_flight, rate = excluded.rate,
    burst = excluded.burst, paused = excluded.paused, weight = excluded.weight, updated_at = excluded.updated_at
"""

CLEAR_RULES: tuple[LiteralString, ...] = ("DELETE FROM inbox_flow_rules", "DELETE FROM inbox_flow_buckets")


def specificity(pattern: str) -> int:
    """A rule's rank among those matching one namespace: its own name first, then the most literal pattern."""
    return 1_000_000 + len(pattern) if "*" not in pattern else len(pattern.replace("*", ""))


def rule_row(pattern: str, **limits: Any) -> dict[str, Any]:
    """UPSERT_RULE's parameters for `pattern` with the given limits (max_in_flight, rate, burst, paused, weight)."""
    unknown = set(limits) - {"max_in_flight", "rate", "burst", "paused", "weight"}
    if unknown:
        raise ValueError(f"no such flow limit: {', '.join(sorted(unknown))}")
    return {
        "pattern": pattern,
        "like_pattern": grant_to_like(pattern),
        "is_pattern": "*" in pattern,
        "specificity": specificity(pattern),
        "max_in_flight": limits.get("max_in_flight"),
        "rate": limits.get("rate"),
        "burst": limits.get("burst"),
        "paused": bool(limits.get("paused", False)),
        "weight": int(limits.get("weight", 1)),
    }


async def set_rules(url: str, rules: Sequence[dict[str, Any]]) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        async with conn.cursor() as cur:
            await cur.executemany(UPSERT_RULE, list(rules))


async def clear_rules(url: str) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for statement in CLEAR_RULES:
            await conn.execute(statement)


async def ledger(url: str, namespaces: Sequence[str]) -> list[tuple[str, float, float | None]]:
    """Every claim of `namespaces`: (namespace, claimed_at, ended_at), in the order they were handed out."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(LEDGER, {"namespaces": list(namespaces)})
        return [(str(ns), float(at), None if end is None else float(end)) for ns, at, end in await cur.fetchall()]


async def db_now(url: str) -> float:
    """The database's clock (epoch seconds): the ledger's own, for windows measured on it."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        row = await (await conn.execute("SELECT now()")).fetchone()
    assert row is not None and isinstance(row[0], datetime)
    return row[0].timestamp()


def handed_out_before_last(rows: Iterable[tuple[str, float, float | None]], noisy: str, quiet: str) -> dict[str, Any]:
    """How many of `noisy`'s events were claimed no later than the Claim that took `quiet`'s last one.

    "No later" counts the events of that same Claim (one statement, one
    claimed_at) as handed out first: the strict reading of "before".
    """
    rows = list(rows)
    quiet_at = [at for ns, at, _ in rows if ns == quiet]
    if not quiet_at:
        return {"noisy_first": sum(1 for ns, _, _ in rows if ns == noisy), "quiet_handed_out": 0}
    last = max(quiet_at)
    return {
        "noisy_first": sum(1 for ns, at, _ in rows if ns == noisy and at <= last),
        "quiet_handed_out": len(quiet_at),
    }


def _edges(intervals: Iterable[Interval]) -> list[tuple[float, int]]:
    # At one instant an end is counted before a start: a lease given back and one handed out in the
    # same microsecond were not both held.
    edges: list[tuple[float, int]] = []
    for start, end in intervals:
        edges.append((start, 1))
        edges.append((math.inf if end is None else end, -1))
    return sorted(edges, key=lambda e: (e[0], e[1]))


def max_overlap(intervals: Iterable[Interval]) -> int:
    """The most intervals held at one instant; one still open (end None) is held to the end of time."""
    held = most = 0
    for _at, step in _edges(intervals):
        held += step
        most = max(most, held)
    return most


def stretches_above(intervals: Iterable[Interval], limit: int) -> list[float]:
    """The length in seconds of each unbroken stretch during which more than `limit` were held at once."""
    held, found, since = 0, [], 0.0
    for at, step in _edges(intervals):
        if held <= limit < held + step:
            since = at
        elif held + step <= limit < held:
            found.append(at - since)
        held += step
    return found


def time_above(intervals: Iterable[Interval], limit: int) -> float:
    """Seconds during which more than `limit` intervals were held at once (infinite if it never ends)."""
    return sum(stretches_above(intervals, limit))


def count_in_window(times: Iterable[float], start: float, seconds: float) -> int:
    return sum(1 for t in times if start <= t < start + seconds)


def per_second(times: Iterable[float], start: float, seconds: float) -> list[int]:
    """Counts of `times` in each whole second of [start, start + seconds)."""
    counts = [0] * max(0, math.floor(seconds))
    for t in times:
        index = math.floor(t - start)
        if 0 <= index < len(counts):
            counts[index] += 1
    return counts


def rate_in_window(times: Iterable[float], start: float, seconds: float) -> float:
    """Events per second over [start, start + seconds)."""
    return count_in_window(times, start, seconds) / seconds if seconds > 0 else 0.0
