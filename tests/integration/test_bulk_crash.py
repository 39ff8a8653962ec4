"""A bulk operation survives a SIGKILL of the server carrying it: the next server resumes it, each event changed once.

`inboxd serve` runs as a subprocess against the session's PostgreSQL and
carries an operation at a rate, in small chunks; half-way it is SIGKILLed.
A second server process (the in-process test servers carry none) picks the
operation up from its committed cursor and finishes it. Counted from the
audit rows that name the operation: every match changed exactly once.
"""

from __future__ import annotations

import asyncio
import signal
from collections import Counter

import grpc

from inboxd.store.database import Database
from inboxd_client.v1 import admin_pb2
from inboxd_client.v1.admin_pb2_grpc import InboxAdminServiceStub
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.harness import ServerProcess
from tests.integration.bulk_fixtures import DONE, RUNNING, audit_rows, dead_letters, get, start, states
from tests.integration.procs import poll

EVENTS, RATE = 200, 100.0  # two seconds of run, chunks of 25
CARRIER = {"INBOXD_BULK_POLL": "50ms"}


async def test_an_operation_whose_server_is_killed_half_way_is_resumed_by_the_next_and_changes_each_event_once(
    migrated_url: str, inbox: InboxServiceStub, admin: InboxAdminServiceStub, db: Database, ns: str
) -> None:
    await dead_letters(inbox, ns, EVENTS)
    first = ServerProcess(database_url=migrated_url, env=CARRIER)
    await asyncio.to_thread(first.start)
    try:
        assert first.proc is not None
        async with grpc.aio.insecure_channel(first.target) as channel:
            op_id = (await start(InboxAdminServiceStub(channel), ns, rate=RATE)).operation.id

            async def half_way() -> int | None:
                done = (await get(admin, op_id)).done
                return done if done >= EVENTS // 4 else None

            done_at_kill = await poll(half_way, within=30, interval=0.02)
            first.proc.send_signal(signal.SIGKILL)
        assert await asyncio.to_thread(first.proc.wait, 30.0) == -signal.SIGKILL
    finally:
        first.kill()
    stopped = await get(admin, op_id)
    assert stopped.state == RUNNING and done_at_kill <= stopped.done < EVENTS, "the kill was meant to land half-way"

    second = ServerProcess(database_url=migrated_url, env=CARRIER)
    await asyncio.to_thread(second.start)
    try:

        async def ended() -> admin_pb2.BulkOperation | None:
            seen = await get(admin, op_id)
            return seen if seen.state != RUNNING else None

        final = await poll(ended, within=60, interval=0.1)
    finally:
        second.kill()

    assert (final.state, final.done, final.skipped) == (DONE, EVENTS, 0)
    audited = Counter(await audit_rows(db, op_id))
    assert len(audited) == EVENTS and set(audited.values()) == {1}, "an event changed twice, or not at all"
    assert set((await states(db, ns)).values()) == {"pending"}
