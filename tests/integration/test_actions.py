"""RecordActionOutcome: one idempotency key per action, honest outcomes, fenced intent."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import grpc
import psycopg
import pytest

from inboxd.store.actions import unresolved_actions
from inboxd.store.database import Database
from inboxd_client.v1 import inbox_pb2, types_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import FakeClock
from tests.integration.helpers import accept_request, expect_status, read_event, seconds
from tests.integration.test_claims import claim_one, fenced

INTENDED = types_pb2.ACTION_STATE_INTENDED
SUCCEEDED = types_pb2.ACTION_STATE_SUCCEEDED
FAILED = types_pb2.ACTION_STATE_FAILED
UNKNOWN = types_pb2.ACTION_STATE_UNKNOWN


async def record(
    work: InboxServiceStub, event: inbox_pb2.ClaimedEvent, state: int, action: str = "send-welcome:v1", **extra: Any
) -> types_pb2.ActionRecord:
    answer = await work.RecordActionOutcome(
        inbox_pb2.RecordActionOutcomeRequest(**fenced(event), action=action, state=state, **extra)  # type: ignore[arg-type]
    )
    result: types_pb2.ActionRecord = answer.action
    return result


async def claimed(work: InboxServiceStub, ns: str, key: str = "k") -> inbox_pb2.ClaimedEvent:
    await work.Accept(accept_request(ns, key))
    return await claim_one(work, ns)


async def test_intent_mints_a_key_that_every_later_record_returns(work: InboxServiceStub, ns: str) -> None:
    event = await claimed(work, ns)
    intent = await record(work, event, INTENDED)
    assert intent.idempotency_key.startswith("idk_")
    assert intent.state == INTENDED
    assert intent.fencing_token == event.fencing_token
    again = await record(work, event, INTENDED)
    done = await record(work, event, SUCCEEDED, external_ref="msg_123")
    assert again.idempotency_key == done.idempotency_key == intent.idempotency_key
    assert (done.state, done.external_ref) == (SUCCEEDED, "msg_123")


@pytest.mark.parametrize(
    "path",
    [
        [INTENDED, SUCCEEDED],
        [INTENDED, FAILED],
        [INTENDED, UNKNOWN],
        [INTENDED, UNKNOWN, SUCCEEDED],
        [INTENDED, UNKNOWN, FAILED],
        [INTENDED, FAILED, INTENDED, SUCCEEDED],
        [SUCCEEDED],
        [UNKNOWN, FAILED, INTENDED],
    ],
)
async def test_every_allowed_transition_keeps_one_key(work: InboxServiceStub, ns: str, path: list[int]) -> None:
    event = await claimed(work, ns)
    keys = set()
    for state in path:
        written = await record(work, event, state)
        assert written.state == state
        keys.add(written.idempotency_key)
    assert len(keys) == 1


@pytest.mark.parametrize(
    ("path", "refused"),
    [
        ([INTENDED, SUCCEEDED], FAILED),
        ([INTENDED, SUCCEEDED], INTENDED),
        ([INTENDED, SUCCEEDED], UNKNOWN),
        ([INTENDED, UNKNOWN], INTENDED),
        ([INTENDED, FAILED], SUCCEEDED),
        ([INTENDED, FAILED], UNKNOWN),
    ],
)
async def test_forbidden_transitions_are_failed_precondition_and_change_nothing(
    work: InboxServiceStub, ns: str, path: list[int], refused: int
) -> None:
    event = await claimed(work, ns)
    for state in path:
        last = await record(work, event, state)
    await expect_status(record(work, event, refused), grpc.StatusCode.FAILED_PRECONDITION)
    after = await record(work, event, path[-1])  # repeating the recorded outcome answers OK
    assert (after.state, after.updated_at) == (last.state, last.updated_at)


async def test_an_outcome_with_no_intent_before_it_creates_the_action(work: InboxServiceStub, ns: str) -> None:
    event = await claimed(work, ns)
    written = await record(work, event, UNKNOWN, detail="timeout after 10 s")
    assert written.idempotency_key
    assert (written.state, written.detail) == (UNKNOWN, "timeout after 10 s")


async def test_a_worker_that_crashed_after_intent_gets_the_same_key_after_the_reclaim(
    work: InboxServiceStub, ns: str, clock: FakeClock
) -> None:
    event = await claimed(work, ns)
    intent = await record(work, event, INTENDED)
    clock.advance(31)
    retaken = await claim_one(work, ns)
    assert [(a.action, a.state, a.idempotency_key) for a in retaken.actions] == [
        ("send-welcome:v1", INTENDED, intent.idempotency_key)
    ]
    again = await record(work, retaken, INTENDED)
    assert again.idempotency_key == intent.idempotency_key
    assert again.fencing_token == retaken.fencing_token > event.fencing_token


async def test_intent_from_a_superseded_claim_is_aborted(work: InboxServiceStub, ns: str, clock: FakeClock) -> None:
    stale = await claimed(work, ns)
    clock.advance(31)
    await claim_one(work, ns)
    await expect_status(record(work, stale, INTENDED), grpc.StatusCode.ABORTED)


async def test_an_outcome_from_a_superseded_claim_is_kept_with_that_claims_fencing_token(
    work: InboxServiceStub, ns: str, clock: FakeClock
) -> None:
    stale = await claimed(work, ns)
    await record(work, stale, INTENDED)
    clock.advance(31)
    current = await claim_one(work, ns)
    late = await record(work, stale, SUCCEEDED, external_ref="msg_9")
    assert (late.state, late.fencing_token) == (SUCCEEDED, stale.fencing_token)
    assert late.fencing_token < current.fencing_token


async def test_outcomes_after_completion_are_still_facts(work: InboxServiceStub, ns: str) -> None:
    event = await claimed(work, ns)
    await record(work, event, INTENDED)
    await work.Complete(inbox_pb2.CompleteRequest(**fenced(event)))
    assert (await record(work, event, SUCCEEDED)).state == SUCCEEDED


async def test_a_token_never_issued_for_the_event_is_aborted(work: InboxServiceStub, ns: str) -> None:
    event = await claimed(work, ns)
    other = await claimed(work, ns, "other")
    forged = inbox_pb2.RecordActionOutcomeRequest(**fenced(event), action="a", state=SUCCEEDED)
    forged.claim_token = other.claim_token  # a real token, of another event
    await expect_status(work.RecordActionOutcome(forged), grpc.StatusCode.ABORTED)
    forged.claim_token = "made-up"
    await expect_status(work.RecordActionOutcome(forged), grpc.StatusCode.ABORTED)


async def test_an_unknown_event_is_not_found(work: InboxServiceStub, ns: str) -> None:
    request = inbox_pb2.RecordActionOutcomeRequest(
        namespace=ns, event_key="ghost", claim_token="t", action="a", state=SUCCEEDED
    )
    await expect_status(work.RecordActionOutcome(request), grpc.StatusCode.NOT_FOUND)


@pytest.mark.parametrize(
    "fields",
    [{"action": "", "state": INTENDED}, {"action": "a", "state": 0}, {"action": "a", "state": 9}],
)
async def test_a_missing_action_or_state_is_invalid(work: InboxServiceStub, ns: str, fields: dict[str, Any]) -> None:
    event = await claimed(work, ns)
    request = inbox_pb2.RecordActionOutcomeRequest(**fenced(event), **fields)
    await expect_status(work.RecordActionOutcome(request), grpc.StatusCode.INVALID_ARGUMENT)


async def test_unresolved_actions_count_unknown_and_stale_intent(
    work: InboxServiceStub, db: Database, ns: str, clock: FakeClock
) -> None:
    event = await claimed(work, ns)
    await record(work, event, UNKNOWN, action="charge")
    await record(work, event, INTENDED, action="send")
    await record(work, event, SUCCEEDED, action="crm")

    async def count(now_offset: float) -> tuple[int, int]:
        found = await db.run(
            lambda conn: unresolved_actions(
                conn, stale_after=timedelta(minutes=15), namespace=ns, now=clock.now + timedelta(seconds=now_offset)
            )
        )
        return (found[0].unknown, found[0].stale_intended) if found else (0, 0)

    assert await count(0) == (1, 0)
    assert await count(16 * 60) == (1, 1)


# -- completing inside the worker's own transaction --


async def _business_table(db: Database) -> None:
    async def create(conn: Any) -> None:
        await conn.execute("CREATE TABLE IF NOT EXISTS test_welcomes (event_key text PRIMARY KEY, fence bigint)")

    await db.run(create)


async def _welcomes(db: Database, key: str) -> int:
    async def read(conn: Any) -> int:
        cur = await conn.execute("SELECT count(*) FROM test_welcomes WHERE event_key = %s", (key,))
        return int((await cur.fetchone())[0])

    return await db.run(read)


async def test_the_business_write_and_the_completion_commit_together(
    work: InboxServiceStub, db: Database, ns: str
) -> None:
    await _business_table(db)
    event = await claimed(work, ns)
    key = f"{ns}/k"

    async def handle(conn: Any) -> Any:
        await conn.execute("INSERT INTO test_welcomes VALUES (%s, %s)", (key, event.fencing_token))
        cur = await conn.execute(
            "SELECT inboxd_complete(%s, %s, %s)", (event.namespace, event.event_key, event.claim_token)
        )
        return (await cur.fetchone())[0]

    assert await db.run(handle) is True
    assert await _welcomes(db, key) == 1
    assert (await read_event(db, ns, "k"))["state"] == "completed"
    # Repeating it with the completing token is a no-op that says so.
    cur_answer = await db.run(
        lambda conn: _scalar(conn, "SELECT inboxd_complete(%s, %s, %s)", (ns, "k", event.claim_token))
    )
    assert cur_answer is False


async def test_with_a_superseded_token_the_function_fails_and_the_business_write_rolls_back(
    work: InboxServiceStub, db: Database, ns: str, clock: FakeClock
) -> None:
    await _business_table(db)
    stale = await claimed(work, ns)
    clock.advance(31)
    await claim_one(work, ns)
    key = f"{ns}/k"

    async def handle(conn: Any) -> None:
        await conn.execute("INSERT INTO test_welcomes VALUES (%s, %s)", (key, stale.fencing_token))
        await conn.execute("SELECT inboxd_complete(%s, %s, %s)", (stale.namespace, stale.event_key, stale.claim_token))

    with pytest.raises(psycopg.Error) as caught:
        await db.run(handle)
    assert caught.value.sqlstate == "IX409"
    assert await _welcomes(db, key) == 0
    assert (await read_event(db, ns, "k"))["state"] == "processing"


async def _scalar(conn: Any, query: str, params: tuple[Any, ...]) -> Any:
    cur = await conn.execute(query, params)
    return (await cur.fetchone())[0]


async def test_claimed_event_lists_the_ledger_so_far(work: InboxServiceStub, ns: str, clock: FakeClock) -> None:
    event = await claimed(work, ns)
    await record(work, event, INTENDED, action="send")
    await record(work, event, SUCCEEDED, action="send", external_ref="m1")
    await record(work, event, INTENDED, action="crm")
    await record(work, event, UNKNOWN, action="crm")
    await work.Fail(inbox_pb2.FailRequest(**fenced(event), error="crm timeout", retry_after=seconds(0)))
    again = await claim_one(work, ns)
    assert {(a.action, a.state, a.external_ref) for a in again.actions} == {
        ("send", SUCCEEDED, "m1"),
        ("crm", UNKNOWN, ""),
    }
