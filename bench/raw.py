"""The raw baseline: inboxd's work done straight through psycopg, with no gRPC and no service.

One AsyncConnection per client, autocommit: each statement is its own
transaction, the fewest round trips and commits the work can take. Claims
use inboxd's own claim query (looked up by name, its parameters filled by
name), so the database does the same claim work as under inboxd. Completion
is one fenced set-based statement of our own, for one event or ten: the
least work PostgreSQL can do for the transition, whatever inboxd's current
completion path is. Its connections plan each statement once, as inboxd's do.

Its INSERTs write what inboxd's own (event_accept_many) writes since
migration 0019: the payload's bytes into raw_payload, sent as a binary bytea
parameter and parsed by nobody, the jsonb `payload` left NULL, content_type
at its default ('application/json', the value inboxd stores for this JSON
payload).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from typing import Any, LiteralString

import psycopg
from psycopg.rows import TupleRow

from bench.loop import Step
from bench.workload import EVENT_TYPE, PAYLOAD_BYTES, Keys, cycle
from inboxd.store.claims import TURN_SLACK
from inboxd.store.database import GENERIC_PLANS
from inboxd.store.queries import QUERIES, numbered
from inboxd.usecases.inbox import CLAIM_ANSWER_BYTES

Conn = psycopg.AsyncConnection[TupleRow]

INSERT_ONE: LiteralString = """
INSERT INTO inbox_events (namespace, event_key, event_type, raw_payload, metadata, message_id, ordering_key,
                          revision, state, accepted_at, available_at, due_at, updated_at)
VALUES (%(namespace)s, %(event_key)s, %(event_type)s, %(payload)b, '{}', '', '', 0, 'pending',
        now(), now(), now(), now())
ON CONFLICT (namespace, event_key) DO NOTHING
RETURNING state, accepted_at
"""

# A repeat as durable as the first: the same INSERT of a stored key (which
# writes nothing), with the transactional WAL message inboxd emits for a
# group of nothing but repeats, so that its COMMIT flushes and would wait for
# a synchronous standby as a write's does (store/queries/accepts.sql).
INSERT_ONE_DURABLE: LiteralString = (
    "WITH stored AS (" + INSERT_ONE + ") SELECT s.state, s.accepted_at"
    " FROM (SELECT pg_logical_emit_message(true, 'inboxd', '') AS lsn) AS m LEFT JOIN stored AS s ON true"
)

INSERT_MANY: LiteralString = """
INSERT INTO inbox_events (namespace, event_key, event_type, raw_payload, metadata, message_id, ordering_key,
                          revision, state, accepted_at, available_at, due_at, updated_at)
SELECT %(namespace)s, k.event_key, %(event_type)s, k.payload, '{}', '', '', 0, 'pending',
       now(), now(), now(), now()
FROM unnest(%(event_keys)b::text[], %(payloads)b::bytea[]) AS k(event_key, payload)
ORDER BY k.event_key
ON CONFLICT (namespace, event_key) DO NOTHING
RETURNING state, accepted_at
"""

# PROCESSING -> COMPLETED for many events in one statement, fenced by claim
# token like inboxd_complete_event, and ending their claims the same way.
COMPLETE_MANY: LiteralString = """
WITH done AS (
    UPDATE inbox_events AS e
    SET state = 'completed', completed_at = now(), disposition = 'applied', disposition_reason = NULL,
        due_at = NULL, lease_expires_at = NULL, updated_at = now()
    FROM unnest(%(namespaces)s::text[], %(event_keys)s::text[], %(claim_tokens)s::text[])
         AS d(namespace, event_key, claim_token)
    WHERE e.namespace = d.namespace AND e.event_key = d.event_key
      AND e.claim_token = d.claim_token AND e.state = 'processing'
    RETURNING e.fencing_token
)
UPDATE inbox_claims AS c SET ended_at = now(), outcome = 'completed'
FROM done WHERE c.fencing_token = done.fencing_token
"""

# inboxd's claim statement, under the first of these names its query files use.
CLAIM_QUERY_NAMES = ("event_claim", "claim_events")
# Its claim of one named namespace that no rule governs, where it has one: what a Claim of one namespace runs.
CLAIM_ONE_QUERY_NAMES = ("event_claim_one",)


def claim_query(namespace: str = "") -> tuple[str, LiteralString]:
    """The statement inboxd's Claim runs for `namespace` ("": a Claim over every namespace)."""
    names = (CLAIM_ONE_QUERY_NAMES if namespace else ()) + CLAIM_QUERY_NAMES
    for name in names:
        if name in QUERIES:
            return name, QUERIES[name]
    raise RuntimeError(f"none of {CLAIM_QUERY_NAMES} among inboxd's named queries: teach bench/raw.py the new name")


def claim_params(namespace: str, batch: int, worker_id: str, wanted: Sequence[str] | None = None) -> dict[str, Any]:
    """Values for every placeholder of the claim query (or of one that takes `wanted`), by name.

    An empty `namespace` is a Claim over every namespace. An unknown placeholder is an error that names it.
    """
    known: dict[str, Any] = {
        "namespaces": [namespace] if namespace else [],
        "namespace": namespace,
        "event_types": [],
        "namespace_patterns": [],
        "namespace_prefixes": [],
        # A Claim of one named namespace walks no prefixes; one over every namespace walks the prefix ""
        # (as store/claims.py passes them). Its turn starts anywhere.
        "prefixes": [] if namespace else [""],
        "after": "",
        "turn_limit": batch + TURN_SLACK,
        "max_events": batch,
        "lease": timedelta(seconds=30),
        "worker_id": worker_id,
        "max_attempts": 10,
        "now": None,
        "ignore_stale": True,
        # The byte budget of one answer, as the server's Claim path passes it.
        "max_bytes": CLAIM_ANSWER_BYTES,
    }
    if wanted is None:
        _text, wanted = numbered(claim_query(namespace)[0])
    unknown = [name for name in wanted if name not in known]
    if unknown:
        raise RuntimeError(f"inboxd's claim query takes {unknown}, which bench/raw.py does not know how to fill")
    return {name: known[name] for name in wanted}


@contextlib.asynccontextmanager
async def connections(url: str, n: int) -> AsyncIterator[list[Conn]]:
    conns: list[Conn] = []
    try:
        for _ in range(n):
            conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
            # As inboxd's own connections do: each statement planned once, not on every call.
            await conn.execute(GENERIC_PLANS)
            conns.append(conn)
        yield conns
    finally:
        for conn in conns:
            await conn.close()


def insert_one_steps(conns: list[Conn], namespace: str, keys: Keys) -> list[Step]:
    def step_for(conn: Conn) -> Step:
        async def step() -> int:
            key = keys.next()
            params = {"namespace": namespace, "event_key": key, "event_type": EVENT_TYPE, "payload": PAYLOAD_BYTES}
            await (await conn.execute(INSERT_ONE, params)).fetchall()
            keys.keep(key)
            return 1

        return step

    return [step_for(c) for c in conns]


def insert_many_steps(conns: list[Conn], namespace: str, keys: Keys, rows: int) -> list[Step]:
    def step_for(conn: Conn) -> Step:
        async def step() -> int:
            # Each row its own payload, one element of a binary bytea[], as
            # inboxd's group insert sends its events' payloads.
            params = {
                "namespace": namespace,
                "event_keys": keys.batch(rows),
                "event_type": EVENT_TYPE,
                "payloads": [PAYLOAD_BYTES] * rows,
            }
            await (await conn.execute(INSERT_MANY, params)).fetchall()
            return rows

        return step

    return [step_for(c) for c in conns]


def duplicate_steps(
    conns: list[Conn], namespace: str, keys: list[str], statement: LiteralString = INSERT_ONE
) -> list[Step]:
    """Each step INSERTs a stored key again (`statement`: INSERT_ONE, or INSERT_ONE_DURABLE)."""
    repeat = cycle(keys)

    def step_for(conn: Conn) -> Step:
        async def step() -> int:
            params = {
                "namespace": namespace,
                "event_key": next(repeat),
                "event_type": EVENT_TYPE,
                "payload": PAYLOAD_BYTES,
            }
            await (await conn.execute(statement, params)).fetchall()
            return 1

        return step

    return [step_for(c) for c in conns]


def claim_complete_steps(conns: list[Conn], namespace: str, batch: int) -> list[Step]:
    """Claim up to `batch` with inboxd's claim query, then complete them in one fenced statement."""
    _name, claim = claim_query(namespace)

    def step_for(index: int, conn: Conn) -> Step:
        params = claim_params(namespace, batch, f"raw-{index}")

        async def step() -> int | None:
            cur = await conn.execute(claim, params)
            rows = await cur.fetchall()
            names = [c.name for c in cur.description or ()]
            ns_at, key_at, token_at = names.index("namespace"), names.index("event_key"), names.index("claim_token")
            # One row of NULLs when nothing was due.
            claimed = [(r[ns_at], r[key_at], r[token_at]) for r in rows if r[ns_at] is not None]
            if not claimed:
                return None
            await conn.execute(
                COMPLETE_MANY,
                {
                    "namespaces": [c[0] for c in claimed],
                    "event_keys": [c[1] for c in claimed],
                    "claim_tokens": [c[2] for c in claimed],
                },
            )
            return len(claimed)

        return step

    return [step_for(i, c) for i, c in enumerate(conns)]
