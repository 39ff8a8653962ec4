"""A Claim that carries the previous batch's completions: a worker's cycle in one call.

Each carried item is judged exactly as an item of CompleteBatch, committed
before the Claim looks for work, and answered in completion_results.
"""

from __future__ import annotations

import asyncio

import grpc
from google.protobuf.duration_pb2 import Duration

from inboxd.store.database import Database
from inboxd_client.v1 import inbox_pb2, types_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.harness import eventually
from tests.integration.helpers import accept_request, expect_status, read_event
from tests.integration.test_complete_batch import (
    ABORTED,
    DENIED,
    INVALID,
    NOT_FOUND,
    OK,
    bearer,
    claimed,
    guarded,  # noqa: F401  (a fixture)
    item,
    tokens,  # noqa: F401  (a fixture)
)


def codes(response: inbox_pb2.ClaimResponse) -> list[int]:
    return [r.code for r in response.completion_results]


async def test_a_claim_completes_the_carried_items_then_claims_the_next(
    inbox: InboxServiceStub, db: Database, ns: str
) -> None:
    events = await claimed(inbox, ns, "done", "stale", "ignored")
    await inbox.Accept(accept_request(ns, "next"))
    answer = await inbox.Claim(
        inbox_pb2.ClaimRequest(
            namespaces=[ns],
            max_events=5,
            completions=[
                item(events["done"]),
                item(events["stale"], claim_token="not-the-current-claim"),
                inbox_pb2.CompleteRequest(namespace=ns, event_key="nobody", claim_token="t"),
                item(events["ignored"], disposition=types_pb2.DISPOSITION_IGNORED),  # no reason
            ],
        )
    )
    assert codes(answer) == [OK, ABORTED, NOT_FOUND, INVALID]
    assert answer.completion_results[3].message.startswith("completions[3].reason")
    assert [e.event_key for e in answer.events] == ["next"]
    assert (await read_event(db, ns, "done"))["state"] == "completed"
    for key in ("stale", "ignored"):
        assert (await read_event(db, ns, key))["state"] == "processing"


async def test_carried_items_are_committed_when_there_is_nothing_to_claim_and_a_retry_repeats_them_harmlessly(
    inbox: InboxServiceStub, db: Database, ns: str
) -> None:
    events = await claimed(inbox, ns, "a", "b")
    request = inbox_pb2.ClaimRequest(namespaces=[ns], completions=[item(events["a"]), item(events["b"])])
    first = await inbox.Claim(request)
    assert (list(first.events), codes(first)) == ([], [OK, OK])
    again = await inbox.Claim(request)  # a client retry after a lost answer
    assert codes(again) == [OK, OK]
    for key in ("a", "b"):
        assert (await read_event(db, ns, key))["state"] == "completed"


async def test_a_waiting_claim_commits_its_carried_items_before_it_waits(
    inbox: InboxServiceStub, db: Database, ns: str
) -> None:
    events = await claimed(inbox, ns, "a")
    waiting = asyncio.ensure_future(
        inbox.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], wait=Duration(seconds=10), completions=[item(events["a"])]))
    )

    async def completed() -> bool:
        return bool((await read_event(db, ns, "a"))["state"] == "completed")

    await eventually(completed, "the carried completion to commit while the Claim waits")
    assert not waiting.done()
    await inbox.Accept(accept_request(ns, "later"))
    answer = await waiting
    assert ([e.event_key for e in answer.events], codes(answer)) == (["later"], [OK])


async def test_more_than_500_carried_items_are_refused_whole(inbox: InboxServiceStub, db: Database, ns: str) -> None:
    events = await claimed(inbox, ns, "a")
    request = inbox_pb2.ClaimRequest(namespaces=[ns], completions=[item(events["a"])] * 501)
    error = await expect_status(inbox.Claim(request), grpc.StatusCode.INVALID_ARGUMENT)
    assert (error.details() or "").startswith("completions: holds 501")
    assert (await read_event(db, ns, "a"))["state"] == "processing"


async def test_a_carried_item_in_a_namespace_the_token_may_not_touch_is_refused_alone(
    guarded: InboxServiceStub,  # noqa: F811
    db: Database,
    tokens: dict[str, str],  # noqa: F811
    ns: str,
) -> None:
    mine, theirs = f"tenant-a/{ns}", f"tenant-b/{ns}"
    own = (await claimed(guarded, mine, "own", **bearer(tokens["root"])))["own"]
    foreign = (await claimed(guarded, theirs, "foreign", **bearer(tokens["root"])))["foreign"]
    answer = await guarded.Claim(
        inbox_pb2.ClaimRequest(namespaces=[mine], completions=[item(foreign), item(own)]), **bearer(tokens["worker-a"])
    )
    assert codes(answer) == [DENIED, OK]
    assert "completions[0].namespace" in answer.completion_results[0].message
    assert (await read_event(db, theirs, "foreign"))["state"] == "processing"
    assert (await read_event(db, mine, "own"))["state"] == "completed"
