"""The lease rescuer: expired leases go back to PENDING in namespaces nobody claims.

Passes run by hand, confined to the test's namespace, with the clock moved
past expiry and grace: no sleeping, and no other test's rows touched.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime, timedelta

import grpc

from inboxd.background.rescuer import run_rescue_pass
from inboxd.domain.vocabulary import EventState
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd.store.rescue import Rescued
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import CLOCKED_SETTINGS, FakeClock
from tests.harness import eventually
from tests.integration.helpers import accept_request, expect_status, read_event, seconds
from tests.integration.test_claims import claim_one, fenced

GRACE = CLOCKED_SETTINGS.rescue_grace


async def rescue(server: RunningServer, now: datetime, ns: str) -> Rescued:
    """One pass by hand; the session's other servers run theirs too, so wait out one that holds the lock."""
    for _ in range(100):
        rescued = await run_rescue_pass(server.inbox, now=now, namespace=ns)
        if rescued is not None:
            return rescued
        await asyncio.sleep(0.05)
    raise AssertionError("another replica held the rescue lock for 5 s")


async def claims_history(db: Database, fencing_token: int) -> tuple[str | None, object]:
    async def work(conn: object) -> tuple[str | None, object]:
        cur = await conn.execute(  # type: ignore[attr-defined]
            "SELECT outcome, ended_at FROM inbox_claims WHERE fencing_token = %s", (fencing_token,)
        )
        row = await cur.fetchone()
        assert row is not None
        return row[0], row[1]

    result: tuple[str | None, object] = await db.run(work)
    return result


async def test_an_expired_lease_in_a_namespace_nobody_claims_is_pending_after_a_pass(
    work: InboxServiceStub, clocked_server: RunningServer, db: Database, ns: str, clock: FakeClock
) -> None:
    await work.Accept(accept_request(ns, "k"))
    event = await claim_one(work, ns, lease=seconds(10))
    past_grace = clock.now + timedelta(seconds=10) + GRACE + timedelta(seconds=1)
    rescued = await rescue(clocked_server, past_grace, ns)
    assert rescued == [(ns, "test.event", EventState.PENDING)]
    row = await read_event(db, ns, "k")
    assert (row["state"], row["claim_token"], row["attempt"]) == ("pending", None, 1)
    assert (await claims_history(db, event.fencing_token))[0] == "expired"
    # The old claim is dead: its token is refused.
    await expect_status(work.Complete(inbox_pb2.CompleteRequest(**fenced(event))), grpc.StatusCode.ABORTED)
    await expect_status(
        work.RenewLease(inbox_pb2.RenewLeaseRequest(**fenced(event), lease=seconds(10))), grpc.StatusCode.ABORTED
    )


async def test_a_lease_within_its_grace_is_left_alone(
    work: InboxServiceStub, clocked_server: RunningServer, db: Database, ns: str, clock: FakeClock
) -> None:
    await work.Accept(accept_request(ns, "k"))
    event = await claim_one(work, ns, lease=seconds(10))
    within_grace = clock.now + timedelta(seconds=10) + GRACE - timedelta(seconds=1)
    assert await rescue(clocked_server, within_grace, ns) == []
    row = await read_event(db, ns, "k")
    assert (row["state"], row["claim_token"]) == ("processing", event.claim_token)
    await work.Complete(inbox_pb2.CompleteRequest(**fenced(event)))


async def test_an_expired_lease_with_its_attempts_spent_is_dead_lettered(
    work: InboxServiceStub, clocked_server: RunningServer, db: Database, ns: str, clock: FakeClock
) -> None:
    await work.Accept(accept_request(ns, "k"))
    for attempt in range(1, CLOCKED_SETTINGS.max_attempts + 1):
        event = await claim_one(work, ns, lease=seconds(10))
        assert event.attempt == attempt
        clock.advance(11)
    past_grace = clock.now + GRACE + timedelta(seconds=1)
    rescued = await rescue(clocked_server, past_grace, ns)
    assert rescued == [(ns, "test.event", EventState.DEAD_LETTERED)]
    row = await read_event(db, ns, "k")
    assert row["state"] == "dead_lettered"
    assert "attempts exhausted" in row["last_error"]
    assert (await claims_history(db, event.fencing_token))[0] == "expired"


async def test_a_rescued_event_is_claimed_again_with_its_next_attempt(
    work: InboxServiceStub, clocked_server: RunningServer, ns: str, clock: FakeClock
) -> None:
    await work.Accept(accept_request(ns, "k"))
    first = await claim_one(work, ns, lease=seconds(10))
    clock.advance(10 + GRACE.total_seconds() + 1)
    await rescue(clocked_server, clock.now, ns)
    again = await claim_one(work, ns)
    assert again.attempt == first.attempt + 1
    assert again.fencing_token > first.fencing_token


async def test_a_server_runs_the_rescuer_on_its_interval(db: Database, ns: str) -> None:
    """The loop Operations starts: no pass by hand, the clock moved past expiry and grace."""
    own_clock = FakeClock()
    settings = replace(CLOCKED_SETTINGS, rescue_interval=timedelta(milliseconds=100))
    running = await start_server(settings, db, clock=own_clock)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as chan:
            stub = InboxServiceStub(chan)
            await stub.Accept(accept_request(ns, "k"))
            event = await claim_one(stub, ns, lease=seconds(1))
            own_clock.advance(1 + GRACE.total_seconds() + 1)

            async def rescued() -> bool:
                return bool((await read_event(db, ns, "k"))["state"] == "pending")

            await eventually(rescued, "the rescuer to return the expired lease")
            await expect_status(stub.Complete(inbox_pb2.CompleteRequest(**fenced(event))), grpc.StatusCode.ABORTED)
    finally:
        await running.stop(1.0)
