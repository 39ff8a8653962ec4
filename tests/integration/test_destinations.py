"""Destinations: inboxd POSTs events to a real aiohttp endpoint that verifies each with standardwebhooks and svix.

One server of the module's own runs the destinations runner (polling every
0.2 s), may reach 127.0.0.1 (INBOXD_DESTINATIONS_ALLOW) over plain http; each
test serves its own namespace with a destination of its own, so the tests
never see each other's deliveries.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest

from inboxd.config.settings import Settings
from inboxd.domain.destinations import webhook_id
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd_client.v1 import admin_pb2, admin_pb2_grpc, inbox_pb2_grpc
from tests.conftest import NO_BULK_RUNNER, NO_RESCUER
from tests.integration.destination_endpoint import Endpoint, destinations_removed, endpoint
from tests.integration.helpers import accept_request, expect_status, read_event, seconds
from tests.integration.procs import poll

__all__ = ["destinations_removed", "endpoint"]

DELIVERING = Settings(
    listen="127.0.0.1:0",
    rescue_interval=NO_RESCUER,
    bulk_poll=NO_BULK_RUNNER,
    destinations_poll=timedelta(seconds=0.2),
    destinations_allow=("127.0.0.1/32",),
    destinations_allow_http=True,
)


@pytest.fixture(scope="module")
async def delivering(db: Database) -> AsyncIterator[RunningServer]:
    running = await start_server(DELIVERING, db)
    yield running
    await running.stop(1.0)


@pytest.fixture(scope="module")
async def channel_d(delivering: RunningServer) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{delivering.port}") as chan:
        yield chan


@pytest.fixture(scope="module")
def admin_d(channel_d: grpc.aio.Channel) -> admin_pb2_grpc.InboxAdminServiceStub:
    return admin_pb2_grpc.InboxAdminServiceStub(channel_d)


@pytest.fixture(scope="module")
def inbox_d(channel_d: grpc.aio.Channel) -> inbox_pb2_grpc.InboxServiceStub:
    return inbox_pb2_grpc.InboxServiceStub(channel_d)


async def create(
    admin: admin_pb2_grpc.InboxAdminServiceStub, endpoint: Endpoint, path: str, ns: str, **fields: Any
) -> admin_pb2.CreateDestinationResponse:
    """A destination serving `ns` that POSTs to the endpoint's `path`; the endpoint learns its secret."""
    fields.setdefault("timeout", seconds(2))
    answer: admin_pb2.CreateDestinationResponse = await admin.CreateDestination(
        admin_pb2.CreateDestinationRequest(
            name=f"d-{uuid.uuid4().hex[:10]}", url=endpoint.url(path), namespace_pattern=ns, reason="test", **fields
        )
    )
    endpoint.secret = answer.secret
    return answer


async def state_of(db: Database, ns: str, key: str, wanted: str, within: float = 10.0) -> dict[str, Any]:
    """The event's row once it is in state `wanted` (a PENDING one: after a failed attempt)."""

    async def check() -> dict[str, Any] | None:
        row = await read_event(db, ns, key)
        failed = wanted != "pending" or row["last_error"] is not None
        return row if row["state"] == wanted and failed else None

    return await poll(check, within=within, interval=0.1)


async def test_a_2xx_completes_the_event_with_its_payload_byte_for_byte_signed_as_standard_webhooks(
    admin_d: admin_pb2_grpc.InboxAdminServiceStub,
    inbox_d: inbox_pb2_grpc.InboxServiceStub,
    endpoint: Endpoint,
    db: Database,
    ns: str,
) -> None:
    created = await create(admin_d, endpoint, "ok", ns)
    assert created.secret.startswith("whsec_")
    payload = b'{"b": 2,   "a": [1, 2]}'
    await inbox_d.Accept(accept_request(ns, "evt-1", payload))

    [got] = await endpoint.wait_for(1)
    assert got.verified, "standardwebhooks and svix must both accept the signature"
    assert got.body == payload
    assert got.headers["content-type"] == "application/json"
    assert got.headers["webhook-id"] == webhook_id(ns, "evt-1")
    assert got.headers["inboxd-attempt"] == "1"
    row = await state_of(db, ns, "evt-1", "completed")
    assert row["disposition"] == "applied"

    event = (await admin_d.GetEvent(admin_pb2.GetEventRequest(namespace=ns, event_key="evt-1"))).event
    [attempt] = event.deliveries
    assert (attempt.destination, attempt.status_code, attempt.outcome) == (created.destination.name, 200, "completed")
    assert attempt.response_excerpt == b"thanks"
    assert attempt.fencing_token == row["fencing_token"]
    # The secret is shown once: no other answer carries it.
    listed = await admin_d.ListDestinations(admin_pb2.ListDestinationsRequest())
    assert created.secret not in str(listed)


async def test_a_5xx_fails_with_backoff_and_every_retry_carries_the_same_webhook_id(
    admin_d: admin_pb2_grpc.InboxAdminServiceStub,
    inbox_d: inbox_pb2_grpc.InboxServiceStub,
    endpoint: Endpoint,
    db: Database,
    ns: str,
) -> None:
    await create(admin_d, endpoint, "fail", ns, backoff_base=seconds(0.05), backoff_cap=seconds(0.1))
    await inbox_d.Accept(accept_request(ns, "evt-1"))
    tries = await endpoint.wait_for(2)
    assert {r.headers["webhook-id"] for r in tries} == {webhook_id(ns, "evt-1")}
    assert [r.headers["inboxd-attempt"] for r in tries[:2]] == ["1", "2"]
    row = await read_event(db, ns, "evt-1")
    assert "HTTP 500: database is down" in row["last_error"]

    endpoint.behaviours["fail"] = endpoint.behaviours["ok"]
    await state_of(db, ns, "evt-1", "completed")
    event = (await admin_d.GetEvent(admin_pb2.GetEventRequest(namespace=ns, event_key="evt-1"))).event
    outcomes = [a.outcome for a in event.deliveries]
    assert outcomes[-1] == "completed" and set(outcomes[:-1]) == {"retry"}, outcomes
    assert all(a.status_code == 500 for a in event.deliveries[:-1])


async def test_a_429_retries_no_sooner_than_its_retry_after(
    admin_d: admin_pb2_grpc.InboxAdminServiceStub,
    inbox_d: inbox_pb2_grpc.InboxServiceStub,
    endpoint: Endpoint,
    db: Database,
    ns: str,
) -> None:
    await create(admin_d, endpoint, "busy", ns, backoff_base=seconds(0.05))
    await inbox_d.Accept(accept_request(ns, "evt-1"))
    await endpoint.wait_for(1)
    row = await state_of(db, ns, "evt-1", "pending")
    # Retry-After: 120 (the destination's own backoff would be 50 ms at most).
    wait = row["available_at"] - datetime.now(UTC)
    assert timedelta(seconds=100) < wait <= timedelta(seconds=120), wait
    assert "HTTP 429" in row["last_error"]


async def test_a_4xx_dead_letters_at_once_keeping_its_status_and_the_start_of_its_body(
    admin_d: admin_pb2_grpc.InboxAdminServiceStub,
    inbox_d: inbox_pb2_grpc.InboxServiceStub,
    endpoint: Endpoint,
    db: Database,
    ns: str,
) -> None:
    await create(admin_d, endpoint, "gone", ns)
    await inbox_d.Accept(accept_request(ns, "evt-1"))
    row = await state_of(db, ns, "evt-1", "dead_lettered")
    assert row["attempt"] == 1
    assert "HTTP 410: this hook was removed" in row["last_error"]
    event = (await admin_d.GetEvent(admin_pb2.GetEventRequest(namespace=ns, event_key="evt-1"))).event
    [attempt] = event.deliveries
    assert (attempt.status_code, attempt.outcome) == (410, "dead-lettered")
    assert len(attempt.response_excerpt) == 1024


async def test_an_endpoint_slower_than_the_timeout_fails_the_attempt(
    admin_d: admin_pb2_grpc.InboxAdminServiceStub,
    inbox_d: inbox_pb2_grpc.InboxServiceStub,
    endpoint: Endpoint,
    db: Database,
    ns: str,
) -> None:
    await create(admin_d, endpoint, "slow", ns, timeout=seconds(1), backoff_base=seconds(60))
    await inbox_d.Accept(accept_request(ns, "evt-1"))
    row = await state_of(db, ns, "evt-1", "pending")
    assert "no answer within the timeout of 1 s" in row["last_error"]
    event = (await admin_d.GetEvent(admin_pb2.GetEventRequest(namespace=ns, event_key="evt-1"))).event
    [attempt] = event.deliveries
    assert (attempt.status_code, attempt.outcome) == (0, "retry")
    assert attempt.latency.ToTimedelta() >= timedelta(seconds=0.9)


async def test_a_redirect_is_not_followed(
    admin_d: admin_pb2_grpc.InboxAdminServiceStub,
    inbox_d: inbox_pb2_grpc.InboxServiceStub,
    endpoint: Endpoint,
    db: Database,
    ns: str,
) -> None:
    await create(admin_d, endpoint, "redirect", ns, backoff_base=seconds(60))
    await inbox_d.Accept(accept_request(ns, "evt-1"))
    row = await state_of(db, ns, "evt-1", "pending")
    assert "HTTP 302 (redirect to /ok not followed)" in row["last_error"]
    assert [r.path for r in endpoint.received] == ["redirect"]


async def test_an_endpoint_down_for_a_while_gets_every_event_once_it_is_back_each_completed_once(
    admin_d: admin_pb2_grpc.InboxAdminServiceStub,
    inbox_d: inbox_pb2_grpc.InboxServiceStub,
    endpoint: Endpoint,
    db: Database,
    ns: str,
) -> None:
    created = await create(admin_d, endpoint, "fail", ns, backoff_base=seconds(0.05), backoff_cap=seconds(0.2))
    keys = [f"evt-{i}" for i in range(12)]
    for key in keys:
        await inbox_d.Accept(accept_request(ns, key))
    # Down: enough failures in a row to open the breaker.
    await endpoint.wait_for(6)

    async def paused() -> admin_pb2.Destination | None:
        got = await admin_d.GetDestination(admin_pb2.GetDestinationRequest(name=created.destination.name))
        return got.destination if got.destination.state == admin_pb2.DESTINATION_STATE_PAUSED else None

    opened = await poll(paused, within=10.0)
    assert "failed deliveries in a row" in opened.paused_reason and "HTTP 500" in opened.paused_reason
    # Back: the breaker's own try (5 s after it opened) finds it, and every event goes.
    endpoint.behaviours["fail"] = endpoint.behaviours["ok"]
    for key in keys:
        await state_of(db, ns, key, "completed", within=14.0)
    answered = Counter(r.headers["webhook-id"] for r in endpoint.received if r.path == "fail")
    assert set(answered) == {webhook_id(ns, k) for k in keys}
    for key in keys:
        event = (await admin_d.GetEvent(admin_pb2.GetEventRequest(namespace=ns, event_key=key))).event
        assert [a.outcome for a in event.deliveries].count("completed") == 1, key
    got = await admin_d.GetDestination(admin_pb2.GetDestinationRequest(name=created.destination.name))
    assert got.destination.state == admin_pb2.DESTINATION_STATE_ACTIVE
    assert got.destination.consecutive_failures == 0


async def test_plain_http_is_refused_unless_allowed(admin: admin_pb2_grpc.InboxAdminServiceStub, ns: str) -> None:
    error = await expect_status(
        admin.CreateDestination(
            admin_pb2.CreateDestinationRequest(
                name="plain", url="http://hooks.example.com/in", namespace_pattern=ns, reason="test"
            )
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert "scheme 'http' is not allowed" in (error.details() or "")


async def test_a_destination_name_is_taken_once_and_a_delete_is_audited(
    admin_d: admin_pb2_grpc.InboxAdminServiceStub, endpoint: Endpoint, db: Database, ns: str
) -> None:
    created = await create(admin_d, endpoint, "ok", ns)
    name = created.destination.name
    await expect_status(
        admin_d.CreateDestination(
            admin_pb2.CreateDestinationRequest(name=name, url=endpoint.url("ok"), namespace_pattern=ns, reason="again")
        ),
        grpc.StatusCode.FAILED_PRECONDITION,
    )
    await expect_status(
        admin_d.DeleteDestination(admin_pb2.DeleteDestinationRequest(name=name)), grpc.StatusCode.INVALID_ARGUMENT
    )
    await admin_d.DeleteDestination(admin_pb2.DeleteDestinationRequest(name=name, reason="moved to v2"))
    await expect_status(admin_d.GetDestination(admin_pb2.GetDestinationRequest(name=name)), grpc.StatusCode.NOT_FOUND)

    async def audit(conn: Any) -> list[tuple[str, str]]:
        cur = await conn.execute(
            "SELECT change, reason FROM inbox_destination_changes WHERE name = %s ORDER BY id", (name,)
        )
        return [tuple(r) for r in await cur.fetchall()]

    assert await db.run(audit) == [("created", "test"), ("deleted", "moved to v2")]
