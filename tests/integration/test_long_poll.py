"""Long-polling Claims: woken by an Accept on this server or another, and never
leaving events claimed by a caller who went away.

The servers here have their fallback poll turned off, so a waiting Claim that
returns before its wait ends can only have been woken by a signal.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import grpc
import pytest

from inboxd.config import Settings
from inboxd.domain import ClaimRequest, Namespace
from inboxd.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.harness import ServerProcess, eventually
from tests.integration.helpers import accept_request, read_event, seconds

NO_FALLBACK = 3600.0
LONG_WAIT = 50.0


@pytest.fixture(scope="module")
async def quiet_server(db: Database) -> AsyncIterator[RunningServer]:
    running = await start_server(Settings(listen="127.0.0.1:0"), db)
    running.inbox.fallback_poll_seconds = NO_FALLBACK
    yield running
    await running.stop(1.0)


@pytest.fixture(scope="module")
async def quiet(quiet_server: RunningServer) -> AsyncIterator[InboxServiceStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{quiet_server.port}") as chan:
        yield InboxServiceStub(chan)


def waiting_claim(stub: InboxServiceStub, ns: str) -> Any:
    return stub.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], wait=seconds(LONG_WAIT)), timeout=LONG_WAIT + 5)


async def test_an_accept_on_the_same_server_wakes_a_waiting_claim(
    quiet: InboxServiceStub, quiet_server: RunningServer, ns: str
) -> None:
    call = waiting_claim(quiet, ns)
    await eventually(lambda: len(quiet_server.inbox.bus) > 0, "the claim to wait")
    await quiet.Accept(accept_request(ns, "wake-me"))
    answer = await asyncio.wait_for(call, LONG_WAIT / 2)
    assert [e.event_key for e in answer.events] == ["wake-me"]


async def test_an_accept_on_another_server_process_wakes_a_waiting_claim(
    quiet: InboxServiceStub, quiet_server: RunningServer, migrated_url: str, ns: str
) -> None:
    other = await asyncio.to_thread(ServerProcess(database_url=migrated_url).start)
    try:
        call = waiting_claim(quiet, ns)
        await eventually(lambda: len(quiet_server.inbox.bus) > 0, "the claim to wait")
        async with grpc.aio.insecure_channel(other.target) as chan:
            await InboxServiceStub(chan).Accept(accept_request(ns, "from-afar"))
        answer = await asyncio.wait_for(call, LONG_WAIT / 2)
        assert [e.event_key for e in answer.events] == ["from-afar"]
    finally:
        other.kill()


async def test_a_waiting_claim_is_not_woken_by_events_it_does_not_want(
    quiet: InboxServiceStub, quiet_server: RunningServer, ns: str
) -> None:
    call = waiting_claim(quiet, ns)
    await eventually(lambda: len(quiet_server.inbox.bus) > 0, "the claim to wait")
    await quiet.Accept(accept_request(ns + "-elsewhere", "not-mine"))
    await quiet.Accept(accept_request(ns, "mine"))
    answer = await asyncio.wait_for(call, LONG_WAIT / 2)
    assert [e.event_key for e in answer.events] == ["mine"]


async def test_a_cancelled_wait_leaves_nothing_claimed(
    quiet: InboxServiceStub, quiet_server: RunningServer, db: Database, ns: str
) -> None:
    call = waiting_claim(quiet, ns)
    await eventually(lambda: len(quiet_server.inbox.bus) > 0, "the claim to wait")
    call.cancel()
    await eventually(lambda: len(quiet_server.inbox.bus) == 0, "the server to drop the cancelled wait")
    await quiet.Accept(accept_request(ns, "k"))
    row = await read_event(db, ns, "k")
    assert (row["state"], row["attempt"]) == ("pending", 0)


async def test_a_wait_longer_than_the_deadline_answers_empty_before_it(quiet: InboxServiceStub, ns: str) -> None:
    answer = await quiet.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], wait=seconds(30)), timeout=1.0)
    assert list(answer.events) == []


async def test_a_claim_cancelled_mid_transaction_releases_what_it_took(
    quiet_server: RunningServer, db: Database, ns: str
) -> None:
    inbox = quiet_server.inbox
    await inbox.accept([_event(ns, "k")])
    locked = asyncio.Event()
    unlock = asyncio.Event()

    async def hold_table(conn: Any) -> None:
        # Blocks the claim's FOR UPDATE, so the cancellation lands mid-transaction.
        await conn.execute("LOCK TABLE inbox_events IN EXCLUSIVE MODE")
        locked.set()
        await unlock.wait()

    holder = asyncio.create_task(db.run(hold_table))
    await locked.wait()
    request = ClaimRequest((ns,), (), 1, timedelta(seconds=30), timedelta(0), "w")
    claim = asyncio.create_task(inbox.claim(request))
    await asyncio.sleep(0.2)  # let the claim reach the lock
    claim.cancel()
    unlock.set()
    await holder
    with pytest.raises(asyncio.CancelledError):
        await claim

    async def released() -> bool:
        row = await read_event(db, ns, "k")
        return bool(row["state"] == "pending" and row["fencing_token"] is not None)

    await eventually(released, "the orphaned claim to be released", within=10)
    row = await read_event(db, ns, "k")
    assert row["attempt"] == 0


def _event(ns: str, key: str) -> Any:
    from inboxd.domain import EventKey, NewEvent

    return NewEvent(namespace=Namespace(ns), event_key=EventKey(key), event_type="test.event", payload_json="{}")
