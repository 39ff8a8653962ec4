"""complete_many and the worker's batched completions, against a real server.

Each item of a CompleteBatch is judged alone: the client hands back one
outcome per item (None, or the error Complete would have raised), and the
worker reports each one to its own event.
"""

# The recording client's `timeout` is grpc's deadline, as in AsyncInboxClient.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import pytest

from inboxd.config.settings import Settings
from inboxd.config.tokens import Scope, TokenRegistry, entry_toml, new_token
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd_client import (
    AsyncInboxClient,
    ClaimSuperseded,
    EventContext,
    InboxClient,
    InboxError,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Worker,
)
from inboxd_client.builders import complete_request
from inboxd_client.completions import CompletionBatcher
from inboxd_client.errors import claim_completion_outcomes
from inboxd_client.v1 import inbox_pb2, types_pb2
from tests.client.conftest import FAST_RETRY
from tests.client.helpers import accept, eventually, read_event, running, state_of
from tests.conftest import NO_RESCUER


async def claim_all(client: AsyncInboxClient, ns: str, *keys: str) -> dict[str, inbox_pb2.ClaimedEvent]:
    await accept(client, ns, *keys)
    answer = await client.claim(namespaces=[ns], max_events=len(keys))
    return {e.event_key: e for e in answer.events}


async def test_complete_many_answers_each_item_alone(client: AsyncInboxClient, db: Database, ns: str) -> None:
    events = await claim_all(client, ns, "done", "ignored", "stale")
    stale = inbox_pb2.ClaimedEvent(namespace=ns, event_key="stale", claim_token="an-old-claim")
    unknown = inbox_pb2.ClaimedEvent(namespace=ns, event_key="unknown", claim_token="t")
    bad = inbox_pb2.ClaimedEvent(namespace=ns, event_key="", claim_token="t")
    outcomes = await client.complete_many(
        [
            events["done"],
            complete_request(events["ignored"], types_pb2.DISPOSITION_IGNORED, "not ours"),
            stale,
            unknown,
            bad,
        ]
    )
    assert [type(o) for o in outcomes] == [type(None), type(None), ClaimSuperseded, NotFound, InvalidArgument]
    assert isinstance(outcomes[4], InboxError) and "completions[4].event_key" in outcomes[4].details
    row = await read_event(db, ns, "ignored")
    assert (row["state"], row["disposition"], row["disposition_reason"]) == ("completed", "ignored", "not ours")
    assert await state_of(db, ns, "done") == "completed"
    assert await state_of(db, ns, "stale") == "processing"


async def test_the_sync_client_completes_many_too(
    server: RunningServer, client: AsyncInboxClient, db: Database, ns: str
) -> None:
    events = await claim_all(client, ns, "a", "b")
    with InboxClient(f"127.0.0.1:{server.port}", retry=FAST_RETRY) as sync:
        outcomes = await asyncio.to_thread(sync.complete_many, [events["a"], events["b"], events["a"]])
    assert outcomes == [None, None, None]  # the repeat of "a" by its own claim is OK
    assert [await state_of(db, ns, k) for k in ("a", "b")] == ["completed", "completed"]


async def test_a_claim_carries_completions_in_both_clients(
    server: RunningServer, client: AsyncInboxClient, db: Database, ns: str
) -> None:
    events = await claim_all(client, ns, "a", "b")
    await accept(client, ns, "next")
    stale = inbox_pb2.ClaimedEvent(namespace=ns, event_key="b", claim_token="an-old-claim")
    answer = await client.claim(namespaces=[ns], completions=[events["a"], stale])
    outcomes = claim_completion_outcomes(answer, 2)
    assert [type(o) for o in outcomes] == [type(None), ClaimSuperseded]
    assert [e.event_key for e in answer.events] == ["next"]
    with InboxClient(f"127.0.0.1:{server.port}", retry=FAST_RETRY) as sync:
        again = await asyncio.to_thread(lambda: sync.claim(namespaces=[ns], completions=[events["b"], *answer.events]))
    assert claim_completion_outcomes(again, 2) == [None, None]
    assert [await state_of(db, ns, k) for k in ("a", "b", "next")] == ["completed"] * 3


@pytest.fixture(scope="module")
def token_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A tokens file, with a worker token for tenant-a/* and a root token."""
    worker, root = new_token(), new_token()
    path = tmp_path_factory.mktemp("tokens") / "tokens.toml"
    entries = entry_toml("worker-a", worker, [Scope.WORK], ["tenant-a/*"]) + entry_toml(
        "root", root, list(Scope), ["*"]
    )
    path.write_text(entries)
    return path, worker, root


@pytest.fixture(scope="module")
async def guarded(db: Database, token_file: tuple[Path, str, str]) -> AsyncIterator[tuple[str, str, str]]:
    """(target, worker token, root token) of a server that checks tokens."""
    path, worker, root = token_file
    running = await start_server(
        Settings(rescue_interval=NO_RESCUER, listen="127.0.0.1:0", tokens_file=path), db, registry=TokenRegistry(path)
    )
    yield f"127.0.0.1:{running.port}", worker, root
    await running.stop(1.0)


async def test_an_item_in_a_namespace_not_granted_is_permission_denied_alone(
    guarded: tuple[str, str, str], db: Database, ns: str
) -> None:
    target, worker_token, root_token = guarded
    mine, theirs = f"tenant-a/{ns}", f"tenant-b/{ns}"
    async with AsyncInboxClient(target, token=root_token) as root:
        own = (await claim_all(root, mine, "own"))["own"]
        foreign = (await claim_all(root, theirs, "foreign"))["foreign"]
    async with AsyncInboxClient(target, token=worker_token) as worker:
        outcomes = await worker.complete_many([foreign, own])
    assert isinstance(outcomes[0], PermissionDenied)
    assert outcomes[1] is None
    assert await state_of(db, theirs, "foreign") == "processing"
    assert await state_of(db, mine, "own") == "completed"


class RecordingClient(AsyncInboxClient):
    """A real client that notes every completing call it makes, a Claim's carried completions included."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.batches: list[int] = []
        self.singles = 0
        self.carried: list[int] = []  # the completions each carrying Claim took
        self.claims = 0  # every Claim, carrying or not

    async def complete_many(self, items: Iterable[Any], *, timeout: float | None = None) -> list[InboxError | None]:
        listed = list(items)
        self.batches.append(len(listed))
        return await super().complete_many(listed, timeout=timeout)

    async def complete(self, event: Any, **kwargs: Any) -> inbox_pb2.CompleteResponse:
        self.singles += 1
        return await super().complete(event, **kwargs)

    async def claim(self, *, completions: Iterable[Any] = (), **kwargs: Any) -> inbox_pb2.ClaimResponse:
        listed = list(completions)
        self.claims += 1
        if listed:
            self.carried.append(len(listed))
        return await super().claim(completions=listed, **kwargs)


async def test_handlers_that_finish_together_ride_one_claim_and_each_learns_its_own_result(
    server: RunningServer, db: Database, ns: str
) -> None:
    keys = ["k1", "k2", "k3", "stale"]
    client = RecordingClient(f"127.0.0.1:{server.port}", retry=FAST_RETRY, timeout=10.0)
    async with client:
        await accept(client, ns, *keys)
        started: list[str] = []
        together = asyncio.Event()
        rival: list[inbox_pb2.ClaimedEvent] = []

        async def handle(ctx: EventContext) -> None:
            if ctx.event_key == "stale":
                # Meanwhile this claim ends and another takes the event: its result must be refused.
                await client.release(ctx.event)
                rival.extend((await client.claim(namespaces=[ns])).events)
            started.append(ctx.event_key)
            if len(started) == len(keys):
                together.set()
            await together.wait()

        # A wide window, so "together" does not depend on how busy the machine is. Every slot
        # is busy, so the worker waits for them and carries them in its next Claim.
        worker = Worker(
            client, handle, namespaces=[ns], concurrency=len(keys), wait=1.0, complete_window=1.0, use_streams=False
        )
        async with running(worker):
            await eventually(lambda: worker.stats.completed + worker.stats.superseded == len(keys), "all settled")
        assert client.carried == [len(keys)]
        assert client.batches == []
        assert client.singles == 0
        assert (worker.stats.completed, worker.stats.superseded) == (3, 1)
    for key in ("k1", "k2", "k3"):
        assert await state_of(db, ns, key) == "completed"
    [taken] = rival
    row = await read_event(db, ns, "stale")
    assert (row["state"], row["claim_token"]) == ("processing", taken.claim_token)


async def test_completions_that_finish_while_a_claim_long_polls_share_one_complete_batch(
    server: RunningServer, db: Database, ns: str
) -> None:
    keys = ["k1", "k2", "k3"]
    client = RecordingClient(f"127.0.0.1:{server.port}", retry=FAST_RETRY, timeout=10.0)
    async with client:
        await accept(client, ns, *keys)
        started: list[str] = []
        together = asyncio.Event()

        async def handle(ctx: EventContext) -> None:
            started.append(ctx.event_key)
            if len(started) == len(keys):
                together.set()
            await together.wait()

        # Slots to spare: the worker long-polls for more while the handlers run, and its
        # completions must not wait for that poll to end.
        worker = Worker(
            client,
            handle,
            namespaces=[ns],
            concurrency=2 * len(keys),
            wait=60.0,
            complete_window=1.0,
            use_streams=False,
        )
        async with running(worker):
            await eventually(lambda: worker.stats.completed == len(keys), "all completed")
            assert client.batches == [len(keys)]
        assert client.carried == []
        assert client.singles == 0
    for key in keys:
        assert await state_of(db, ns, key) == "completed"


async def test_a_full_batch_goes_out_at_once_without_waiting_for_the_window(
    server: RunningServer, db: Database, ns: str
) -> None:
    client = RecordingClient(f"127.0.0.1:{server.port}", retry=FAST_RETRY, timeout=10.0)
    async with client:
        events = await claim_all(client, ns, "a", "b", "c", "d")
        # A window no test would wait out: only the size can send these.
        batcher = CompletionBatcher(client, window=600.0, max_items=2)
        await asyncio.wait_for(asyncio.gather(*(batcher.complete(e) for e in events.values())), 30)
        assert client.batches == [2, 2]
    assert [await state_of(db, ns, k) for k in "abcd"] == ["completed"] * 4
