"""The typed client against a real server: values in, typed answers and typed errors out.

The sync client runs in a thread: the server shares the test's event loop.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest

from inboxd.serving.server import RunningServer
from inboxd.store.database import Database
from inboxd_client import (
    AcceptOutcome,
    ActionState,
    AsyncInboxClient,
    ClaimSuperseded,
    Disposition,
    EventState,
    InboxClient,
    InvalidArgument,
    accept_request,
)
from tests.client.helpers import read_event


async def test_accept_answers_accepted_then_duplicate_then_conflict(client: AsyncInboxClient, ns: str) -> None:
    first = await client.accept(ns, "k", "order.paid", {"total": 10, "currency": "EUR"}, metadata={"delivery": "d1"})
    again = await client.accept(ns, "k", "order.paid", b'{"currency": "EUR", "total": 10}', metadata={"delivery": "d2"})
    other = await client.accept(ns, "k", "order.paid", {"total": 11, "currency": "EUR"})
    assert [first.outcome, again.outcome, other.outcome] == [
        AcceptOutcome.ACCEPT_OUTCOME_ACCEPTED,
        AcceptOutcome.ACCEPT_OUTCOME_DUPLICATE,
        AcceptOutcome.ACCEPT_OUTCOME_CONFLICT,
    ]
    assert first.state == EventState.EVENT_STATE_PENDING


async def test_accept_batch_answers_one_result_per_event_in_order(client: AsyncInboxClient, ns: str) -> None:
    await client.accept(ns, "b", "t", {})
    answer = await client.accept_batch(accept_request(ns, key, "t", {}) for key in ("a", "b", "c"))
    assert [r.outcome for r in answer.results] == [
        AcceptOutcome.ACCEPT_OUTCOME_ACCEPTED,
        AcceptOutcome.ACCEPT_OUTCOME_DUPLICATE,
        AcceptOutcome.ACCEPT_OUTCOME_ACCEPTED,
    ]


async def test_bad_input_raises_invalid_argument_naming_the_field(client: AsyncInboxClient, ns: str) -> None:
    with pytest.raises(InvalidArgument, match="payload"):
        await client.accept(ns, "k", "t", b"not json")


async def test_a_delayed_event_is_not_claimable_before_available_at(client: AsyncInboxClient, ns: str) -> None:
    await client.accept(ns, "later", "t", {}, available_at=datetime.now(UTC) + timedelta(hours=1))
    assert list((await client.claim(namespaces=[ns])).events) == []


async def test_the_sync_client_claims_renews_and_completes(server: RunningServer, db: Database, ns: str) -> None:
    def work() -> None:
        with InboxClient(f"127.0.0.1:{server.port}") as client:
            client.accept(ns, "k", "t", {"n": 1})
            [event] = client.claim(namespaces=[ns], lease=timedelta(seconds=20), wait=1).events
            assert (event.event_key, event.attempt, json.loads(event.payload)) == ("k", 1, {"n": 1})
            renewed = client.renew_lease(event, lease=60)
            assert renewed.lease_expires_at.ToDatetime(tzinfo=UTC) > datetime.now(UTC) + timedelta(seconds=30)
            client.complete(event, disposition=Disposition.DISPOSITION_IGNORED, reason="test")
            client.complete(event, disposition=Disposition.DISPOSITION_IGNORED, reason="test")  # idempotent

    await asyncio.to_thread(work)
    row = await read_event(db, ns, "k")
    assert (row["state"], row["disposition"]) == ("completed", "ignored")


async def test_fenced_calls_with_an_ended_claim_raise_claim_superseded(client: AsyncInboxClient, ns: str) -> None:
    await client.accept(ns, "k", "t", {})
    [event] = (await client.claim(namespaces=[ns])).events
    await client.release(event)
    with pytest.raises(ClaimSuperseded):
        await client.renew_lease(event)
    with pytest.raises(ClaimSuperseded):
        await client.complete(event)
    with pytest.raises(ClaimSuperseded):
        await client.fail(event, "late")


async def test_fail_answers_the_state_it_led_to(client: AsyncInboxClient, ns: str) -> None:
    await client.accept(ns, "k", "t", {})
    [event] = (await client.claim(namespaces=[ns])).events
    answer = await client.fail(event, "nope", permanent=True)
    assert answer.state == EventState.EVENT_STATE_DEAD_LETTERED
    assert not answer.HasField("next_attempt_at")


def test_instants_must_be_timezone_aware() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        accept_request("ns", "k", "t", {}, available_at=datetime(2030, 1, 1))


async def test_the_admin_calls_show_the_event_its_actions_and_the_counts_and_replay_it(
    client: AsyncInboxClient, ns: str
) -> None:
    await client.accept(ns, "k", "t", {})
    await client.accept(ns, "other", "t", {}, available_at=datetime.now(UTC) + timedelta(hours=1))
    [event] = (await client.claim(namespaces=[ns])).events
    await client.record_action_outcome(event, "send", ActionState.ACTION_STATE_UNKNOWN, detail="timed out")

    record = (await client.get_event(ns, "k")).event
    assert record.summary.state == EventState.EVENT_STATE_PROCESSING
    assert [(a.action, a.state) for a in record.actions] == [("send", ActionState.ACTION_STATE_UNKNOWN)]
    listed = await client.list_events(ns, state=EventState.EVENT_STATE_PENDING)
    assert [e.event_key for e in listed.events] == ["other"]
    [counts] = (await client.stats(ns)).namespaces
    assert (counts.pending, counts.processing, counts.unresolved_actions) == (1, 1, 1)

    await client.complete(event)
    replayed = await client.replay(ns, "k", "resend after the mail outage")
    assert replayed.event.summary.state == EventState.EVENT_STATE_PENDING
