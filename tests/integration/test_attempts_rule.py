"""One rule for "no attempts left", wherever it is decided.

Claim, the rescuer and a Work stream's end decide it in SQL (event_claim,
event_rescue_expired, event_stream_end), Fail in Python
(domain.backoff.decide_failure). Here an event with `attempt` attempts made
meets each of the four, and each must dead-letter it exactly when the others
would.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from inboxd.domain.backoff import BackoffPolicy, decide_failure
from inboxd.domain.vocabulary import ClaimRequest, ClaimToken, EventKey, EventState, Fence, Namespace
from inboxd.store import claims, streams
from inboxd.store.database import Connection, Database
from inboxd.store.rescue import rescue_expired_leases
from inboxd.usecases.inbox import CLAIM_ANSWER_BYTES

MAX_ATTEMPTS = 3
NOW = datetime(2030, 1, 1, tzinfo=UTC)


def fail_dead_letters(attempt: int) -> bool:
    decision = decide_failure(
        attempt=attempt, max_attempts=MAX_ATTEMPTS, permanent=False, retry_after=None, policy=BackoffPolicy()
    )
    return decision.state is EventState.DEAD_LETTERED


async def put_event(db: Database, ns: str, *, attempt: int, processing: bool) -> None:
    """One event with `attempt` attempts made: PENDING and due, or PROCESSING with a lease long expired."""

    async def work(conn: Connection) -> None:
        await conn.execute(
            "INSERT INTO inbox_events (namespace, event_key, event_type, payload, state, attempt, claim_token,"
            " fencing_token, lease_expires_at, accepted_at, available_at, due_at, updated_at)"
            " VALUES (%(ns)s, 'k', 't', '{}', %(state)s, %(attempt)s,"
            "  CASE WHEN %(processing)s THEN 'old-claim' END,"
            "  CASE WHEN %(processing)s THEN nextval('inbox_fencing_tokens') END,"
            "  CASE WHEN %(processing)s THEN %(due)s::timestamptz END,"
            "  %(due)s, %(due)s, %(due)s, %(due)s)",
            {
                "ns": ns,
                "state": "processing" if processing else "pending",
                "attempt": attempt,
                "processing": processing,
                "due": NOW - timedelta(hours=1),
            },
        )

    await db.run(work)


async def state_of(db: Database, ns: str) -> str:
    async def work(conn: Connection) -> str:
        cur = await conn.execute("SELECT state FROM inbox_events WHERE namespace = %s AND event_key = 'k'", (ns,))
        row = await cur.fetchone()
        assert row is not None
        return str(row[0])

    return await db.run(work)


@pytest.mark.parametrize("attempt", [MAX_ATTEMPTS - 1, MAX_ATTEMPTS, MAX_ATTEMPTS + 1])
@pytest.mark.parametrize("processing", [False, True], ids=["pending", "lease expired"])
async def test_claim_dead_letters_exactly_when_fail_would(
    db: Database, ns: str, attempt: int, processing: bool
) -> None:
    await put_event(db, ns, attempt=attempt, processing=processing)
    request = ClaimRequest(
        namespaces=(ns,), event_types=(), max_events=1, lease=timedelta(seconds=30), wait=timedelta(0), worker_id="w"
    )
    batch = await db.run(
        lambda conn: claims.claim_events(
            conn, request, max_attempts=MAX_ATTEMPTS, max_bytes=CLAIM_ANSWER_BYTES, now=NOW
        )
    )
    assert (batch.dead_lettered == 1) is fail_dead_letters(attempt)
    assert len(batch.events) == (0 if fail_dead_letters(attempt) else 1)


@pytest.mark.parametrize("attempt", [MAX_ATTEMPTS - 1, MAX_ATTEMPTS, MAX_ATTEMPTS + 1])
async def test_the_rescuer_dead_letters_exactly_when_fail_would(
    db: Database, migrated_url: str, ns: str, attempt: int
) -> None:
    await put_event(db, ns, attempt=attempt, processing=True)
    rescued = await rescue_expired_leases(
        migrated_url, grace=timedelta(minutes=1), max_attempts=MAX_ATTEMPTS, now=NOW, namespace=ns
    )
    assert rescued is not None and len(rescued) == 1
    assert (await state_of(db, ns) == "dead_lettered") is fail_dead_letters(attempt)


@pytest.mark.parametrize("attempt", [MAX_ATTEMPTS - 1, MAX_ATTEMPTS, MAX_ATTEMPTS + 1])
async def test_a_work_streams_end_dead_letters_exactly_when_fail_would(db: Database, ns: str, attempt: int) -> None:
    await put_event(db, ns, attempt=attempt, processing=True)
    held = [Fence(Namespace(ns), EventKey("k"), ClaimToken("old-claim"))]
    ended = await db.run(lambda conn: streams.end_held(conn, held, max_attempts=MAX_ATTEMPTS, now=NOW))
    assert len(ended) == 1
    assert (await state_of(db, ns) == "dead_lettered") is fail_dead_letters(attempt)
