"""Claim, RenewLease, Complete, Fail, Release: leased work fenced by claim tokens.

Time is the `clock` fixture: leases expire and backoffs pass by moving it.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import grpc
import pytest

from inboxd.store.database import Database
from inboxd_client.v1 import inbox_pb2, types_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import CLOCKED_SETTINGS, FakeClock
from tests.integration.helpers import accept_request, expect_status, read_event, seconds

ABORTED = grpc.StatusCode.ABORTED


async def claim_one(work: InboxServiceStub, ns: str, **fields: object) -> inbox_pb2.ClaimedEvent:
    answer = await work.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], **fields))  # type: ignore[arg-type]
    assert len(answer.events) == 1, f"expected one event, got {len(answer.events)}"
    event: inbox_pb2.ClaimedEvent = answer.events[0]
    return event


async def claim_none(work: InboxServiceStub, ns: str) -> None:
    answer = await work.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], max_events=100))
    assert list(answer.events) == []


def fenced(event: inbox_pb2.ClaimedEvent) -> dict[str, Any]:
    return {"namespace": event.namespace, "event_key": event.event_key, "claim_token": event.claim_token}


async def test_claim_hands_out_the_oldest_due_events_first(work: InboxServiceStub, ns: str, clock: FakeClock) -> None:
    for key, age in (("young", 10), ("oldest", 300), ("middle", 100)):
        at = inbox_pb2.AcceptRequest().available_at.__class__()
        at.FromDatetime(clock.now - timedelta(seconds=age))
        await work.Accept(accept_request(ns, key, available_at=at))
    answer = await work.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], max_events=2))
    assert [e.event_key for e in answer.events] == ["oldest", "middle"]
    first = answer.events[0]
    assert first.attempt == 1
    assert first.claim_token
    assert first.fencing_token > 0
    assert first.lease_expires_at.ToDatetime().timestamp() == pytest.approx(
        (clock.now + timedelta(seconds=30)).timestamp()
    )


async def test_claim_filters_by_namespace_and_event_type(work: InboxServiceStub, ns: str) -> None:
    await work.Accept(accept_request(ns, "a", event_type="order.paid"))
    await work.Accept(accept_request(ns, "b", event_type="order.refunded"))
    await work.Accept(accept_request(ns + "-other", "c", event_type="order.paid"))
    answer = await work.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], event_types=["order.paid"], max_events=10))
    assert [(e.namespace, e.event_key) for e in answer.events] == [(ns, "a")]


async def test_a_delayed_event_is_claimable_only_once_due(work: InboxServiceStub, ns: str, clock: FakeClock) -> None:
    at = inbox_pb2.AcceptRequest().available_at.__class__()
    at.FromDatetime(clock.now + timedelta(seconds=60))
    await work.Accept(accept_request(ns, "later", available_at=at))
    await claim_none(work, ns)
    clock.advance(61)
    assert (await claim_one(work, ns)).event_key == "later"


async def test_claim_returns_the_payload_metadata_and_fields_as_accepted(work: InboxServiceStub, ns: str) -> None:
    await work.Accept(
        accept_request(
            ns, "k", {"to": "a@example.com"}, metadata={"delivery": "d1"}, message_id="m1", ordering_key="o", revision=7
        )
    )
    event = await claim_one(work, ns, worker_id="w1")
    assert event.payload == b'{"to": "a@example.com"}'
    assert dict(event.metadata) == {"delivery": "d1"}
    assert (event.message_id, event.ordering_key, event.revision, event.event_type) == ("m1", "o", 7, "test.event")


async def test_after_a_crash_the_lease_expires_and_another_worker_takes_over_with_a_higher_fencing_token(
    work: InboxServiceStub, db: Database, ns: str, clock: FakeClock
) -> None:
    await work.Accept(accept_request(ns, "k"))
    crashed = await claim_one(work, ns, lease=seconds(10))
    await claim_none(work, ns)  # a live lease is not handed out again
    clock.advance(11)
    taken = await claim_one(work, ns)
    assert taken.fencing_token > crashed.fencing_token
    assert taken.attempt == crashed.attempt + 1
    assert taken.claim_token != crashed.claim_token

    # The crashed worker comes back: every fenced call is refused and changes nothing.
    await expect_status(work.RenewLease(inbox_pb2.RenewLeaseRequest(**fenced(crashed))), ABORTED)
    await expect_status(work.Complete(inbox_pb2.CompleteRequest(**fenced(crashed))), ABORTED)
    await expect_status(work.Fail(inbox_pb2.FailRequest(**fenced(crashed), error="late")), ABORTED)
    error = await expect_status(work.Release(inbox_pb2.ReleaseRequest(**fenced(crashed))), ABORTED)
    assert "claim superseded" in (error.details() or "")
    row = await read_event(db, ns, "k")
    assert (row["state"], row["claim_token"], row["attempt"]) == ("processing", taken.claim_token, 2)
    await work.Complete(inbox_pb2.CompleteRequest(**fenced(taken)))
    assert (await read_event(db, ns, "k"))["state"] == "completed"


async def test_an_expired_lease_that_nobody_reclaimed_still_completes(
    work: InboxServiceStub, db: Database, ns: str, clock: FakeClock
) -> None:
    await work.Accept(accept_request(ns, "k"))
    event = await claim_one(work, ns, lease=seconds(5))
    clock.advance(60)
    await work.Complete(inbox_pb2.CompleteRequest(**fenced(event)))
    assert (await read_event(db, ns, "k"))["state"] == "completed"


async def test_renew_lease_moves_the_expiry_and_keeps_the_event(
    work: InboxServiceStub, ns: str, clock: FakeClock
) -> None:
    await work.Accept(accept_request(ns, "k"))
    event = await claim_one(work, ns, lease=seconds(10))
    clock.advance(8)
    renewed = await work.RenewLease(inbox_pb2.RenewLeaseRequest(**fenced(event), lease=seconds(10)))
    assert renewed.lease_expires_at.ToDatetime().timestamp() == pytest.approx(
        (clock.now + timedelta(seconds=10)).timestamp()
    )
    clock.advance(8)  # past the first lease, within the renewed one
    await claim_none(work, ns)


async def test_complete_is_idempotent_for_the_completing_token_only(
    work: InboxServiceStub, ns: str, clock: FakeClock
) -> None:
    await work.Accept(accept_request(ns, "k"))
    event = await claim_one(work, ns)
    await work.Complete(inbox_pb2.CompleteRequest(**fenced(event)))
    await work.Complete(inbox_pb2.CompleteRequest(**fenced(event)))
    forged: dict[str, Any] = {**fenced(event), "claim_token": "not-a-token"}
    await expect_status(work.Complete(inbox_pb2.CompleteRequest(**forged)), ABORTED)
    # The claim ended with the completion: other fenced calls with it are refused.
    await expect_status(work.Release(inbox_pb2.ReleaseRequest(**fenced(event))), ABORTED)


async def test_ignored_keeps_its_reason_and_needs_one(work: InboxServiceStub, db: Database, ns: str) -> None:
    await work.Accept(accept_request(ns, "k"))
    event = await claim_one(work, ns)
    ignored = types_pb2.DISPOSITION_IGNORED
    await expect_status(
        work.Complete(inbox_pb2.CompleteRequest(**fenced(event), disposition=ignored)),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    await work.Complete(inbox_pb2.CompleteRequest(**fenced(event), disposition=ignored, reason="test mailbox"))
    row = await read_event(db, ns, "k")
    assert (row["state"], row["disposition"], row["disposition_reason"]) == ("completed", "ignored", "test mailbox")


async def test_unspecified_disposition_means_applied(work: InboxServiceStub, db: Database, ns: str) -> None:
    await work.Accept(accept_request(ns, "k"))
    await work.Complete(inbox_pb2.CompleteRequest(**fenced(await claim_one(work, ns))))
    assert (await read_event(db, ns, "k"))["disposition"] == "applied"


async def test_release_gives_the_event_back_without_counting_the_attempt(
    work: InboxServiceStub, db: Database, ns: str
) -> None:
    await work.Accept(accept_request(ns, "k"))
    event = await claim_one(work, ns)
    await work.Release(inbox_pb2.ReleaseRequest(**fenced(event)))
    row = await read_event(db, ns, "k")
    assert (row["state"], row["attempt"], row["claim_token"]) == ("pending", 0, None)
    again = await claim_one(work, ns)
    assert again.attempt == 1
    assert again.fencing_token > event.fencing_token


async def test_fail_backs_off_exponentially_with_jitter_under_the_cap(
    work: InboxServiceStub, db: Database, ns: str, clock: FakeClock
) -> None:
    await work.Accept(accept_request(ns, "k"))
    for attempt in (1, 2):
        event = await claim_one(work, ns)
        assert event.attempt == attempt
        answer = await work.Fail(inbox_pb2.FailRequest(**fenced(event), error=f"boom {attempt}"))
        assert answer.state == types_pb2.EVENT_STATE_PENDING
        delay = answer.next_attempt_at.ToDatetime().timestamp() - clock.now.timestamp()
        ceiling = CLOCKED_SETTINGS.backoff_base.total_seconds() * 2 ** (attempt - 1)
        assert 0 <= delay <= ceiling + 1e-6
        row = await read_event(db, ns, "k")
        assert (row["state"], row["last_error"]) == ("pending", f"boom {attempt}")
        if delay > 0.001:
            await claim_none(work, ns)  # not before its time
        clock.advance(ceiling + 0.001)
    assert (await claim_one(work, ns)).last_error == "boom 2"


async def test_retry_after_overrides_the_backoff(work: InboxServiceStub, ns: str, clock: FakeClock) -> None:
    await work.Accept(accept_request(ns, "k"))
    event = await claim_one(work, ns)
    answer = await work.Fail(inbox_pb2.FailRequest(**fenced(event), error="rate limited", retry_after=seconds(120)))
    assert answer.next_attempt_at.ToDatetime().timestamp() == pytest.approx(clock.now.timestamp() + 120)
    clock.advance(119)
    await claim_none(work, ns)
    clock.advance(2)
    await claim_one(work, ns)


async def test_fail_dead_letters_on_the_last_attempt(
    work: InboxServiceStub, db: Database, ns: str, clock: FakeClock
) -> None:
    await work.Accept(accept_request(ns, "k"))
    for attempt in range(1, CLOCKED_SETTINGS.max_attempts + 1):
        event = await claim_one(work, ns)
        assert event.attempt == attempt
        answer = await work.Fail(inbox_pb2.FailRequest(**fenced(event), error="still broken"))
        clock.advance(120)
    assert answer.state == types_pb2.EVENT_STATE_DEAD_LETTERED
    assert not answer.HasField("next_attempt_at")
    row = await read_event(db, ns, "k")
    assert (row["state"], row["attempt"], row["last_error"]) == ("dead_lettered", 3, "still broken")
    await claim_none(work, ns)


async def test_a_permanent_failure_dead_letters_at_once(work: InboxServiceStub, db: Database, ns: str) -> None:
    await work.Accept(accept_request(ns, "k"))
    event = await claim_one(work, ns)
    answer = await work.Fail(inbox_pb2.FailRequest(**fenced(event), error="bad schema", permanent=True))
    assert answer.state == types_pb2.EVENT_STATE_DEAD_LETTERED
    assert (await read_event(db, ns, "k"))["state"] == "dead_lettered"


async def test_a_poison_event_whose_worker_dies_every_time_ends_in_dead_letters(
    work: InboxServiceStub, db: Database, ns: str, clock: FakeClock
) -> None:
    await work.Accept(accept_request(ns, "poison", event_type="test.poison"))
    await work.Accept(accept_request(ns, "healthy"))
    for _ in range(CLOCKED_SETTINGS.max_attempts):
        await claim_one(work, ns, event_types=["test.poison"])  # the worker dies holding it
        answer = await work.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], event_types=["test.event"], max_events=10))
        for event in answer.events:  # healthy work behind it still flows
            await work.Complete(inbox_pb2.CompleteRequest(**fenced(event)))
        clock.advance(31)
    await claim_none(work, ns)  # the exhausted event is dead-lettered, not handed out
    row = await read_event(db, ns, "poison")
    assert row["state"] == "dead_lettered"
    assert "attempts exhausted" in row["last_error"]
    assert (await read_event(db, ns, "healthy"))["state"] == "completed"


async def test_the_error_is_stored_truncated_to_4_kib(work: InboxServiceStub, db: Database, ns: str) -> None:
    await work.Accept(accept_request(ns, "k"))
    event = await claim_one(work, ns)
    await work.Fail(inbox_pb2.FailRequest(**fenced(event), error="é" * 5000 + "\x00"))
    stored = (await read_event(db, ns, "k"))["last_error"]
    assert len(stored.encode()) <= 4096
    assert stored.startswith("éé")


async def test_fenced_calls_on_an_unknown_event_are_not_found(work: InboxServiceStub, ns: str) -> None:
    ghost: dict[str, Any] = {"namespace": ns, "event_key": "ghost", "claim_token": "t"}
    await expect_status(work.Complete(inbox_pb2.CompleteRequest(**ghost)), grpc.StatusCode.NOT_FOUND)
    await expect_status(work.RenewLease(inbox_pb2.RenewLeaseRequest(**ghost)), grpc.StatusCode.NOT_FOUND)
    await expect_status(work.Fail(inbox_pb2.FailRequest(**ghost)), grpc.StatusCode.NOT_FOUND)
    await expect_status(work.Release(inbox_pb2.ReleaseRequest(**ghost)), grpc.StatusCode.NOT_FOUND)


@pytest.mark.parametrize(
    "fields",
    [
        {"max_events": 101},
        {"max_events": -1},
        {"lease": seconds(0.5)},
        {"lease": seconds(3601)},
        {"wait": seconds(61)},
        {"wait": seconds(-1)},
        {"namespaces": [""]},
        {"worker_id": "w" * 513},
    ],
)
async def test_out_of_range_claims_are_invalid(work: InboxServiceStub, fields: dict[str, object]) -> None:
    await expect_status(work.Claim(inbox_pb2.ClaimRequest(**fields)), grpc.StatusCode.INVALID_ARGUMENT)  # type: ignore[arg-type]


async def test_concurrent_workers_never_share_an_event_and_each_completes_exactly_once(
    work: InboxServiceStub, ns: str
) -> None:
    total = 300
    await work.AcceptBatch(inbox_pb2.AcceptBatchRequest(events=[accept_request(ns, f"e{i}") for i in range(total)]))
    held: set[str] = set()
    completed: list[str] = []
    overlaps: list[str] = []

    async def worker() -> None:
        while True:
            answer = await work.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], max_events=5))
            if not answer.events:
                return
            for event in answer.events:
                if event.event_key in held:
                    overlaps.append(event.event_key)
                held.add(event.event_key)
            await asyncio.sleep(0)  # let the other workers claim while these are held
            for event in answer.events:
                held.discard(event.event_key)
                await work.Complete(inbox_pb2.CompleteRequest(**fenced(event)))
                completed.append(event.event_key)

    await asyncio.gather(*(worker() for _ in range(20)))
    assert overlaps == []
    assert sorted(completed) == sorted(f"e{i}" for i in range(total))
