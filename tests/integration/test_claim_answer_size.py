"""A Claim's answer stays within a byte budget: big events come in several Claims, never as dead letters.

Issue 25, item 2: six events of 900 KiB in one answer passed gRPC's default
4 MiB receive limit; the client got RESOURCE_EXHAUSTED after the server had
leased the events and counted their attempts, and every lease expiry did it
again until they were dead letters, never run. The `inbox` fixture's channel
keeps gRPC's defaults, so it receives at most 4 MiB, as a client that set
nothing does.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from inboxd.config.settings import Settings
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd.usecases.inbox import CLAIM_ANSWER_BYTES
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.integration.helpers import accept_request, read_event
from tests.integration.test_claims import fenced

KiB = 1024
MiB = 1024 * KiB
GRPC_DEFAULT_RECEIVE_LIMIT = 4 * MiB


def _big(ns: str, key: str, size: int) -> inbox_pb2.AcceptRequest:
    return accept_request(ns, key, json.dumps({"fill": "x" * (size - 16)}).encode())


async def _accept_big(inbox: InboxServiceStub, ns: str, count: int, size: int) -> list[str]:
    keys = [f"big-{i}" for i in range(count)]
    await inbox.AcceptBatch(inbox_pb2.AcceptBatchRequest(events=[_big(ns, key, size) for key in keys]))
    return keys


def test_the_budget_leaves_room_under_grpcs_default_receive_limit() -> None:
    # What the claim statement does not count (ledgers, completion results, framing) has 1 MiB.
    assert CLAIM_ANSWER_BYTES <= GRPC_DEFAULT_RECEIVE_LIMIT - MiB


async def test_big_events_past_the_budget_come_in_several_claims_each_received_none_dead_lettered(
    inbox: InboxServiceStub, db: Database, ns: str
) -> None:
    keys = await _accept_big(inbox, ns, 6, 900 * KiB)
    claimed: list[inbox_pb2.ClaimedEvent] = []
    answers = 0
    while len(claimed) < len(keys):
        # A client with gRPC's default 4 MiB receive limit: any larger answer fails here.
        answer = await inbox.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], max_events=len(keys)))
        assert answer.events, f"a Claim came back empty with {len(keys) - len(claimed)} events still due"
        assert answer.ByteSize() <= GRPC_DEFAULT_RECEIVE_LIMIT
        claimed.extend(answer.events)
        answers += 1
    assert answers > 1
    assert sorted(e.event_key for e in claimed) == keys
    assert {e.attempt for e in claimed} == {1}
    for key in keys:
        row = await read_event(db, ns, key)
        assert (row["state"], row["attempt"]) == ("processing", 1)


async def test_events_left_out_by_the_budget_stay_pending_with_no_attempt_counted(
    inbox: InboxServiceStub, db: Database, ns: str
) -> None:
    keys = await _accept_big(inbox, ns, 6, 900 * KiB)
    answer = await inbox.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], max_events=len(keys)))
    taken = {e.event_key for e in answer.events}
    assert 0 < len(taken) < len(keys)
    for key in set(keys) - taken:
        row = await read_event(db, ns, key)
        assert (row["state"], row["attempt"], row["claim_token"]) == ("pending", 0, None)


@pytest.fixture
async def small_budget(settings: Settings, db: Database) -> AsyncIterator[InboxServiceStub]:
    """A server whose Claims may answer 100 KiB of events: budgets, not payload limits, at test sizes."""
    running: RunningServer = await start_server(settings, db)
    running.inbox.claim_answer_bytes = 100 * KiB
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            yield InboxServiceStub(channel)
    finally:
        await running.stop(1.0)


async def test_the_first_event_goes_out_even_when_alone_it_passes_the_budget(
    small_budget: InboxServiceStub, ns: str
) -> None:
    keys = await _accept_big(small_budget, ns, 3, 200 * KiB)
    for expected in keys:
        answer = await small_budget.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], max_events=10))
        assert [e.event_key for e in answer.events] == [expected]


async def test_small_events_fill_a_claim_up_to_the_budget_in_due_order(small_budget: InboxServiceStub, ns: str) -> None:
    # 25 KiB each, 29 KiB with the 4 KiB allowance: three fit in 100 KiB, the fourth would pass it.
    keys: list[str] = []
    for i in range(5):
        keys.append(f"small-{i}")
        await small_budget.Accept(_big(ns, keys[-1], 25 * KiB))
    first = await small_budget.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], max_events=10))
    assert [e.event_key for e in first.events] == keys[:3]
    second = await small_budget.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], max_events=10))
    assert [e.event_key for e in second.events] == keys[3:]


async def test_stale_and_dead_events_end_whatever_the_budget(
    small_budget: InboxServiceStub, db: Database, ns: str
) -> None:
    # Events that end in the Claim send no bytes: the budget holds back only those handed out.
    await small_budget.Accept(accept_request(ns, "v2", ordering_key="k", revision=2))
    answer = await small_budget.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], max_events=10))
    await small_budget.Complete(inbox_pb2.CompleteRequest(**fenced(answer.events[0])))
    await small_budget.Accept(accept_request(ns, "v1", ordering_key="k", revision=1))
    await small_budget.Accept(_big(ns, "a", 60 * KiB))
    await small_budget.Accept(_big(ns, "b", 60 * KiB))
    answer = await small_budget.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], max_events=10))
    assert [e.event_key for e in answer.events] == ["a"]
    stale: dict[str, Any] = await read_event(db, ns, "v1")
    assert (stale["state"], stale["disposition"]) == ("completed", "ignored")
