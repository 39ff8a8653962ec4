"""An idle worker does not hammer the server: after an empty `wait=0` Claim it pauses, longer each time.

A long-polling worker (the default) lets the server hold its Claim until work
comes. One with `wait=0` cannot, so it waits between Claims itself; the pause
doubles up to a second, and work arriving resets it.
"""

from __future__ import annotations

import asyncio

from inboxd.serving.server import RunningServer
from inboxd.store.database import Database
from inboxd_client import EventContext, Worker
from tests.client.conftest import FAST_RETRY
from tests.client.helpers import accept, eventually, running, state_of
from tests.client.test_complete_many import RecordingClient

# The interval whose Claims are counted.
IDLE = 1.5


async def test_an_idle_worker_with_wait_0_backs_off_instead_of_claiming_in_a_loop(
    server: RunningServer, db: Database, ns: str
) -> None:
    client = RecordingClient(f"127.0.0.1:{server.port}", retry=FAST_RETRY, timeout=10.0)
    handled: list[str] = []

    async def handle(ctx: EventContext) -> None:
        handled.append(ctx.event_key)

    async with client:
        worker = Worker(client, handle, namespaces=[ns], wait=0, use_streams=False)  # Claims are what is counted
        async with running(worker):
            await asyncio.sleep(IDLE)  # idle on purpose: what is counted is what it sends meanwhile
            idle_claims = client.claims
            # Still a worker: an event that arrives is claimed within the pause's cap, and completed.
            await accept(client, ns, "k")
            await eventually(lambda: handled == ["k"] and worker.stats.completed == 1, "the event completed")
    # Pauses of 0.05, 0.1, 0.2, 0.4 and 0.8 s: six Claims in 1.5 s, where a busy loop sent hundreds.
    assert idle_claims <= 10, f"{idle_claims} Claims in {IDLE} s of idling"
    assert await state_of(db, ns, "k") == "completed"
    # With wait=0 the completion rode a Claim.
    assert client.carried == [1]
