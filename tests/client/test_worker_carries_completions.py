"""The Worker's completions ride its next Claim: a busy worker's cycle is one call, and none is lost.

All of it is the unary Claim path's (`use_streams=False`); on the Work stream
completions go as CompleteBatch calls over the stream.

The server is real; a client subclass stands in for what only the network
does (a Claim's answer lost) or what an older server does (ignore
ClaimRequest.completions: the Claim reaches it without them, and answers no
completion_results).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

import pytest

from inboxd.serving.server import RunningServer
from inboxd.store.database import Database
from inboxd_client import EventContext, Unavailable, Worker
from inboxd_client.v1 import inbox_pb2
from tests.client.conftest import FAST_RETRY
from tests.client.helpers import accept, eventually, read_event, running, state_of
from tests.client.test_complete_many import RecordingClient


async def test_a_busy_worker_carries_its_completions_in_its_claims_instead_of_complete_batch(
    server: RunningServer, db: Database, ns: str
) -> None:
    keys = [f"k{i}" for i in range(20)]
    concurrency = 2
    client = RecordingClient(f"127.0.0.1:{server.port}", retry=FAST_RETRY, timeout=10.0)
    async with client:
        await accept(client, ns, *keys)

        async def handle(ctx: EventContext) -> None:
            await asyncio.sleep(0)

        worker = Worker(client, handle, namespaces=[ns], concurrency=concurrency, wait=1.0, use_streams=False)
        async with running(worker):
            await eventually(lambda: worker.stats.completed == len(keys), "all completed")
    # While work remains every Claim comes back full, so the worker is never idle and
    # long-polls only once the namespace is empty: at most the last `concurrency`
    # completions can finish during that poll and go as a CompleteBatch.
    assert sum(client.carried) >= len(keys) - concurrency
    assert sum(client.carried) + sum(client.batches) == len(keys)
    assert client.singles == 0
    assert [await state_of(db, ns, k) for k in keys] == ["completed"] * len(keys)


async def test_completions_waiting_for_a_claim_are_sent_when_the_worker_stops(
    server: RunningServer, db: Database, ns: str
) -> None:
    client = RecordingClient(f"127.0.0.1:{server.port}", retry=FAST_RETRY, timeout=10.0)
    async with client:
        await accept(client, ns, "k")
        handled = asyncio.Event()

        async def handle(ctx: EventContext) -> None:
            handled.set()

        # Its only slot busy, the worker holds the completion for its next Claim, and a
        # window no test waits out means only stopping can send it.
        worker = Worker(
            client, handle, namespaces=[ns], concurrency=1, wait=1.0, complete_window=600.0, use_streams=False
        )
        task = asyncio.create_task(worker.run(handle_signals=False))
        await asyncio.wait_for(handled.wait(), 15)
        await eventually(lambda: worker.completions.waiting == 1, "the completion waits for a Claim")
        worker.stop()
        await asyncio.wait_for(task, 30)
        assert worker.stats.completed == 1
        assert (client.batches, client.carried) == ([1], [])
    assert await state_of(db, ns, "k") == "completed"


class LosingClient(RecordingClient):
    """Loses the answer of the first Claim that carries completions: before the server saw it, or after."""

    def __init__(self, *args: Any, committed: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.committed = committed
        self.lost = 0

    async def claim(self, *, completions: Iterable[Any] = (), **kwargs: Any) -> inbox_pb2.ClaimResponse:
        listed = list(completions)
        if listed and not self.lost:
            self.lost += 1
            if self.committed:
                await super().claim(completions=listed, **kwargs)
            raise Unavailable("the answer was lost on the way back")
        return await super().claim(completions=listed, **kwargs)


@pytest.mark.parametrize("committed", [False, True], ids=["lost-before-commit", "lost-after-commit"])
async def test_completions_of_a_failed_claim_are_sent_again_not_dropped(
    server: RunningServer, db: Database, ns: str, committed: bool
) -> None:
    client = LosingClient(f"127.0.0.1:{server.port}", retry=FAST_RETRY, timeout=10.0, committed=committed)
    async with client:
        await accept(client, ns, "k")

        async def handle(ctx: EventContext) -> None:
            return None

        worker = Worker(client, handle, namespaces=[ns], concurrency=1, wait=1.0, use_streams=False)
        async with running(worker):
            await eventually(lambda: worker.stats.completed == 1, "the completion answered")
        assert client.lost == 1
        # In doubt, it went again as a CompleteBatch; a repeat of a committed one answers OK.
        assert client.batches == [1]
        assert (worker.stats.errors, worker.stats.superseded) == (0, 0)
    row = await read_event(db, ns, "k")
    assert (row["state"], row["attempt"]) == ("completed", 1)


class OlderServerClient(RecordingClient):
    """Sends a Claim as a server older than ClaimRequest.completions reads it: without them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ignored: list[int] = []

    async def claim(self, *, completions: Iterable[Any] = (), **kwargs: Any) -> inbox_pb2.ClaimResponse:
        listed = list(completions)
        if listed:
            self.ignored.append(len(listed))
        return await super().claim(**kwargs)


async def test_a_worker_falls_back_to_complete_batch_when_the_server_ignores_a_claims_completions(
    server: RunningServer, db: Database, ns: str
) -> None:
    keys = ["k1", "k2", "k3"]
    client = OlderServerClient(f"127.0.0.1:{server.port}", retry=FAST_RETRY, timeout=10.0)
    async with client:
        await accept(client, ns, *keys)

        async def handle(ctx: EventContext) -> None:
            return None

        worker = Worker(client, handle, namespaces=[ns], concurrency=1, wait=1.0, use_streams=False)
        async with running(worker):
            await eventually(lambda: worker.stats.completed == len(keys), "all completed")
        # One Claim tried; its answer had no results, so CompleteBatch from then on.
        assert (client.ignored, client.carried) == ([1], [])
        assert sum(client.batches) == len(keys)
        # That Claim leased into the slot of the completion it ignored: given back, uncounted.
        assert worker.stats.released == 1
    for key in keys:
        row = await read_event(db, ns, key)
        assert (row["state"], row["attempt"]) == ("completed", 1), key
