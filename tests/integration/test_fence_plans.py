"""A fenced write reaches its row by primary key, however many claims came before it; and the
work path's statements are planned once per connection, not on every call.

Every write after a claim names the event's key, its claim token and the
PROCESSING state. inbox_events_listing (namespace, state, accepted_at,
event_key) also matches the namespace and the state, and its statistics make
PROCESSING look rare; a plan that probes it walks every PROCESSING entry of
the namespace, the dead ones left by earlier claims included, for each event
written. Here a namespace has had many claims since its last VACUUM, and
EXPLAIN (ANALYZE, BUFFERS) of each fenced statement, under a generic and a
custom plan, must read a bounded number of buffers per event: counts, never
times.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from inboxd.domain.vocabulary import ClaimRequest, Completion, Disposition, EventKey, Fence, Namespace, NewEvent
from inboxd.store.database import Database
from inboxd.usecases.inbox import Inbox
from tests.conftest import CLOCKED_SETTINGS
from tests.integration.helpers import own_database
from tests.integration.test_claim_plans import _walk, explain_prepared

NAMESPACE = "tenant-a/busy"
PENDING = 60_000
# Claimed and completed since the last VACUUM: each left a dead PROCESSING entry in every index.
CHURNED = 3_000
HELD = 10
# A primary-key probe and its update touch a handful of pages per event; the
# walk of the dead PROCESSING entries read thousands.
BOUND_PER_EVENT = 40


@pytest.fixture(scope="module")
async def churned_url(migrated_url: str) -> AsyncIterator[str]:
    """PENDING events analyzed as such, then CHURNED claimed and completed, then HELD claimed now."""
    async with own_database(migrated_url, prefix="inboxd_plans") as url:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(
                "INSERT INTO inbox_events (namespace, event_key, event_type, payload, accepted_at, available_at,"
                " due_at, updated_at)"
                " SELECT %s, 'k' || i, 'test.event', '{}', now(), now(), now(), now()"
                " FROM generate_series(1, %s) AS i",
                (NAMESPACE, PENDING),
            )
            await conn.execute("VACUUM (ANALYZE) inbox_events")
            await conn.execute("ALTER TABLE inbox_events SET (autovacuum_enabled = false)")
            for first in range(1, CHURNED + 1, 100):
                keys = [f"k{i}" for i in range(first, min(first + 100, CHURNED + 1))]
                await conn.execute(
                    "UPDATE inbox_events SET state = 'processing', claim_token = 'old-' || event_key, attempt = 1,"
                    " fencing_token = nextval('inbox_fencing_tokens'),"
                    " lease_expires_at = now() + interval '30 s', due_at = now() + interval '30 s'"
                    " WHERE namespace = %s AND event_key = ANY(%s)",
                    (NAMESPACE, keys),
                )
                await conn.execute(
                    "UPDATE inbox_events SET state = 'completed', completed_at = now(), disposition = 'applied',"
                    " due_at = NULL, lease_expires_at = NULL WHERE namespace = %s AND event_key = ANY(%s)",
                    (NAMESPACE, keys),
                )
            await conn.execute(
                "UPDATE inbox_events SET state = 'processing', claim_token = 'held-' || event_key, attempt = 1,"
                " fencing_token = nextval('inbox_fencing_tokens'),"
                " lease_expires_at = now() + interval '30 s', due_at = now() + interval '30 s'"
                " WHERE namespace = %s AND event_key = ANY(%s)",
                (NAMESPACE, held_keys()),
            )
        yield url


def held_keys() -> list[str]:
    return [f"k{i}" for i in range(CHURNED + 1, CHURNED + 1 + HELD)]


def events_buffers(plan: dict[str, Any]) -> int:
    """Buffers read by the scans of inbox_events (not the writes' own index upkeep)."""
    return sum(
        int(node.get("Shared Hit Blocks", 0) + node.get("Shared Read Blocks", 0))
        for node in _walk(plan["Plan"])
        if node.get("Relation Name") == "inbox_events" and "Scan" in node.get("Node Type", "")
    )


def one(**values: Any) -> dict[str, Any]:
    key = held_keys()[0]
    return {"namespace": NAMESPACE, "event_key": key, "claim_token": f"held-{key}", "now": None, **values}


def every(**values: Any) -> dict[str, Any]:
    keys = held_keys()
    return {
        "namespaces": [NAMESPACE] * len(keys),
        "event_keys": keys,
        "claim_tokens": [f"held-{key}" for key in keys],
        "now": None,
        **values,
    }


# Each fenced statement: its parameters in PREPARE's order, values, and how many events it writes.
FENCED: dict[str, tuple[tuple[str, ...], dict[str, Any], int]] = {
    "event_renew_lease": (
        ("now", "lease", "namespace", "event_key", "claim_token"),
        one(lease=timedelta(seconds=30)),
        1,
    ),
    "event_fail_lock": (("namespace", "event_key", "claim_token"), one(), 1),
    "event_fail": (
        ("now", "delay", "error", "namespace", "event_key", "claim_token"),
        one(delay=timedelta(seconds=5), error="boom"),
        1,
    ),
    "event_release_many": (("now", "namespaces", "event_keys", "claim_tokens"), every(), HELD),
    "event_complete_many": (
        ("namespaces", "event_keys", "claim_tokens", "dispositions", "reasons", "now"),
        every(dispositions=["applied"] * HELD, reasons=[""] * HELD),
        HELD,
    ),
}


@pytest.mark.parametrize("plan_cache_mode", ["force_generic_plan", "force_custom_plan"])
@pytest.mark.parametrize("statement", sorted(FENCED))
async def test_a_fenced_write_reads_a_bounded_number_of_buffers_after_many_claims(
    churned_url: str, statement: str, plan_cache_mode: str
) -> None:
    parameters, values, events = FENCED[statement]
    async with await psycopg.AsyncConnection.connect(churned_url, autocommit=True) as conn:
        plan = await explain_prepared(conn, plan_cache_mode, statement, parameters, values)
    read = events_buffers(plan)
    assert read <= BOUND_PER_EVENT * events, (
        f"{statement}: {read} buffers\n" + json.dumps(plan["Plan"], indent=1)[:3000]
    )


async def _prepared_plans(conn: Any) -> dict[str, tuple[int, int]]:
    """This connection's prepared statements, by their first line (`-- inboxd: name`): (generic, custom) plans."""
    cur = await conn.execute("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")
    return {text.split("\n", 1)[0]: (generic, custom) for text, generic, custom in await cur.fetchall()}


async def test_the_work_paths_statements_are_planned_once_per_connection(migrated_url: str) -> None:
    """PostgreSQL re-planned the claim and completion statements on every call when left to choose."""
    async with own_database(migrated_url, prefix="inboxd_plans") as url:
        db = Database(url, min_size=1, max_size=1)
        await db.open()
        try:
            inbox = Inbox(db, CLOCKED_SETTINGS)
            request = ClaimRequest(
                namespaces=("plans/once",),
                event_types=(),
                max_events=2,
                lease=timedelta(seconds=30),
                wait=timedelta(0),
                worker_id="w",
            )
            for round_ in range(8):
                await inbox.accept(
                    [NewEvent(Namespace("plans/once"), EventKey(f"k{round_}-{i}"), "t", b"{}") for i in range(2)]
                )
                # A Claim of one namespace runs event_claim_one; of two, event_claim's whole turn.
                both = replace(request, namespaces=("plans/once", "plans/twice"))
                claimed = await inbox.claim(request if round_ % 2 else both)
                await inbox.complete_many(
                    [
                        Completion(Fence(e.namespace, e.event_key, e.claim_token), Disposition.APPLIED, "")
                        for e in claimed.events
                    ]
                )

            async def jit(conn: Any) -> str:
                cur = await conn.execute("SELECT current_setting('jit')")
                row = await cur.fetchone()
                return str(row[0])

            found = await db.run(_prepared_plans, transaction=False)
            # Nor is a generic plan ever JIT-compiled on every execution.
            assert await db.run(jit, transaction=False) == "off"
        finally:
            await db.close()
    for name in ("event_claim", "event_claim_one", "event_complete_many", "event_accept_many"):
        generic, custom = found[f"-- inboxd: {name}"]
        assert generic > 0 and custom == 0, f"{name}: {generic} generic plans, {custom} custom: {found}"


async def test_the_work_paths_statements_are_prepared_at_their_first_execution(migrated_url: str) -> None:
    """A new connection planned the claim statement six times (about 7 ms each) before it kept a plan."""
    async with own_database(migrated_url, prefix="inboxd_plans") as url:
        db = Database(url, min_size=1, max_size=1)
        await db.open()
        try:
            inbox = Inbox(db, CLOCKED_SETTINGS)
            await inbox.accept([NewEvent(Namespace("plans/first"), EventKey("k"), "t", b"{}")])
            request = ClaimRequest(
                namespaces=("plans/first",),
                event_types=(),
                max_events=1,
                lease=timedelta(seconds=30),
                wait=timedelta(0),
                worker_id="w",
            )
            [event] = (await inbox.claim(request)).events
            await inbox.complete(Fence(event.namespace, event.event_key, event.claim_token), Disposition.APPLIED, "")
            found = await db.run(_prepared_plans, transaction=False)
        finally:
            await db.close()
    for name in ("event_accept_many", "event_claim_one", "event_complete_many"):
        assert found.get(f"-- inboxd: {name}") == (1, 0), f"{name} after one execution: {found}"
