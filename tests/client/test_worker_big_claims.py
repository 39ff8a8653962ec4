"""A Claim whose answer is bigger than the client's receive limit: the worker asks for fewer events.

The answer is refused by the client's own channel (RESOURCE_EXHAUSTED) after
the server leased its events, so asking again for as many would lose them
the same way each time their leases expire, until they are dead letters.
"""

from __future__ import annotations

import logging

import pytest

from inboxd.serving.server import RunningServer
from inboxd.store.database import Database
from inboxd_client import AsyncInboxClient, EventContext, ResourceExhausted, Worker
from tests.client.conftest import FAST_RETRY
from tests.client.helpers import accept, eventually, running, state_of

RECEIVE_LIMIT = 64 * 1024
# Eight of them pass the limit by far; two fit.
PAYLOAD = {"blob": "x" * 20_000}
KEYS = [f"k{i}" for i in range(8)]

# Each test runs on the Work stream and on unary Claims (tests/client/conftest.py).
pytestmark = pytest.mark.usefixtures("worker_path")


async def test_a_worker_whose_claim_answer_passes_its_receive_limit_halves_its_batch_and_runs_every_event(
    server: RunningServer, db: Database, ns: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="inboxd_client.worker")
    small = AsyncInboxClient(
        f"127.0.0.1:{server.port}",
        retry=FAST_RETRY,
        timeout=10.0,
        options=[("grpc.max_receive_message_length", RECEIVE_LIMIT)],
    )
    handled: set[str] = set()

    async def handle(ctx: EventContext) -> None:
        handled.add(ctx.event_key)

    async with small:
        await accept(small, ns, *KEYS, payload=PAYLOAD)
        # What the worker will meet: the channel refuses an answer of eight.
        with pytest.raises(ResourceExhausted):
            await small.claim(namespaces=[ns], max_events=len(KEYS), lease=1.0)
        worker = Worker(small, handle, namespaces=[ns], concurrency=len(KEYS), lease=1.0, wait=1.0)
        async with running(worker):
            await eventually(lambda: worker.stats.completed == len(KEYS), "every event ran", within=30)
    assert handled == set(KEYS)
    assert [await state_of(db, ns, k) for k in KEYS] == ["completed"] * len(KEYS)
    # Per Claim on unary Claims; per push on the Work stream, whose credit is what is halved.
    assert "answered RESOURCE_EXHAUSTED" in caplog.text and "asking for at most 4 per" in caplog.text
