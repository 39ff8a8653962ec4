"""What the admin API says about why an event is where it is: who holds it until when, and what it waits behind."""

from __future__ import annotations

from inboxd_client.v1 import admin_pb2, inbox_pb2
from inboxd_client.v1.admin_pb2_grpc import InboxAdminServiceStub
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import FakeClock
from tests.integration.admin_fixtures import clocked_admin
from tests.integration.helpers import accept_request, seconds
from tests.integration.test_claims import claim_one, fenced

__all__ = ["clocked_admin"]  # the fixture, imported so pytest finds it


async def test_a_processing_summary_names_its_worker_its_lease_expiry_and_its_attempt(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, ns: str, clock: FakeClock
) -> None:
    await work.Accept(accept_request(ns, "one"))
    await work.Accept(accept_request(ns, "two"))
    # On the hand-moved clock both were accepted at the same instant: either may come first.
    claim = await claim_one(work, ns, worker_id="worker-3", lease=seconds(600))
    page = await clocked_admin.ListEvents(admin_pb2.ListEventsRequest(namespace=ns))
    by_key = {e.event_key: e for e in page.events}
    held = by_key.pop(claim.event_key)
    [waiting] = by_key.values()
    assert (held.worker_id, held.attempt) == ("worker-3", 1)
    assert held.lease_expires_at.ToDatetime().timestamp() == clock.now.timestamp() + 600
    assert (waiting.worker_id, waiting.HasField("lease_expires_at")) == ("", False)


async def test_an_event_waiting_behind_its_ordering_key_names_the_event_it_waits_for(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, ns: str
) -> None:
    for key in ("a-first", "b-second", "c-third"):
        await work.Accept(accept_request(ns, key, ordering_key="cart-9"))

    async def blocked_by(key: str) -> str:
        answer = await clocked_admin.GetEvent(admin_pb2.GetEventRequest(namespace=ns, event_key=key))
        return str(answer.event.blocked_by_event_key)

    # Before any claim, the key's first event comes first; it waits for nobody.
    assert [await blocked_by(k) for k in ("a-first", "b-second", "c-third")] == ["", "a-first", "a-first"]
    held = await claim_one(work, ns)
    assert (await blocked_by("a-first"), await blocked_by("b-second")) == ("", "a-first")
    # Failed and retrying later, it still holds the key: the others still wait for it, it for nobody.
    await work.Fail(inbox_pb2.FailRequest(**fenced(held), error="boom", retry_after=seconds(3600)))
    assert (await blocked_by("a-first"), await blocked_by("c-third")) == ("", "a-first")
    await work.Accept(accept_request(ns, "free"))  # no ordering key: never blocked
    assert await blocked_by("free") == ""


async def test_oldest_claimable_does_not_count_an_event_waiting_behind_its_ordering_key(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, ns: str, clock: FakeClock
) -> None:
    await work.Accept(accept_request(ns, "a-held", ordering_key="cart-1"))
    await work.Accept(accept_request(ns, "b-behind", ordering_key="cart-1"))
    await claim_one(work, ns, lease=seconds(3600))
    clock.advance(30)
    [stats] = (await clocked_admin.Stats(admin_pb2.StatsRequest(namespace=ns))).namespaces
    # Nothing a worker could take now: the one PENDING event waits behind its key, and says so there.
    assert (stats.pending, stats.HasField("oldest_claimable_age")) == (1, False)
    assert (stats.blocked_ordering_keys, stats.oldest_blocked_age.seconds) == (1, 30)
    await work.Accept(accept_request(ns, "c-free"))
    clock.advance(5)
    [stats] = (await clocked_admin.Stats(admin_pb2.StatsRequest(namespace=ns))).namespaces
    assert stats.oldest_claimable_age.seconds == 5
