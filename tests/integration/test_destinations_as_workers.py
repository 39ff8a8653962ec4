"""Destinations as workers: fenced by their claim, bound by flow control, the body and headers as accepted.

On the delivering server of tests/integration/test_destinations.py (a module
instance of its own here).
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from inboxd.store.database import Database
from inboxd_client.v1 import admin_pb2, admin_pb2_grpc, inbox_pb2_grpc
from tests.integration.destination_endpoint import Endpoint, destinations_removed, endpoint
from tests.integration.helpers import accept_request, read_event, seconds
from tests.integration.procs import poll
from tests.integration.test_destinations import admin_d, channel_d, create, delivering, inbox_d, state_of
from tests.integration.test_flow_control import remove_rules

__all__ = ["admin_d", "channel_d", "delivering", "destinations_removed", "endpoint", "inbox_d"]


async def test_a_deliverer_whose_claim_ended_meanwhile_never_completes_the_event(
    admin_d: admin_pb2_grpc.InboxAdminServiceStub,
    inbox_d: inbox_pb2_grpc.InboxServiceStub,
    endpoint: Endpoint,
    db: Database,
    ns: str,
) -> None:
    release = asyncio.Event()

    async def held_until_released(request: web.Request) -> web.StreamResponse:
        if len(endpoint.on("held")) == 1:
            await release.wait()
        return web.Response(status=200, text="ok")

    endpoint.behaviours["held"] = held_until_released
    await create(admin_d, endpoint, "held", ns, timeout=seconds(10))
    await inbox_d.Accept(accept_request(ns, "evt-1"))
    await endpoint.wait_for(1)
    first = await read_event(db, ns, "evt-1")
    # The operator ends the claim while its POST is in flight: its holder is fenced from then on.
    await admin_d.EndClaim(
        admin_pb2.EndClaimRequest(
            namespace=ns, event_key="evt-1", expected_fencing_token=first["fencing_token"], reason="stuck"
        )
    )
    # The event goes again under a new claim (answered at once), then the first POST's 200 arrives.
    await endpoint.wait_for(2)
    await state_of(db, ns, "evt-1", "completed")
    release.set()

    async def both_recorded() -> list[admin_pb2.DeliveryAttempt] | None:
        event = (await admin_d.GetEvent(admin_pb2.GetEventRequest(namespace=ns, event_key="evt-1"))).event
        return list(event.deliveries) if len(event.deliveries) == 2 else None

    attempts = await poll(both_recorded, within=10.0)
    by_claim = {a.fencing_token: a.outcome for a in attempts}
    assert by_claim[first["fencing_token"]] == "fenced"
    final = await read_event(db, ns, "evt-1")
    assert by_claim[final["fencing_token"]] == "completed"
    assert final["fencing_token"] != first["fencing_token"]


async def test_a_form_body_goes_byte_for_byte_with_its_content_type_and_the_providers_signature_on_request(
    admin_d: admin_pb2_grpc.InboxAdminServiceStub,
    inbox_d: inbox_pb2_grpc.InboxServiceStub,
    endpoint: Endpoint,
    db: Database,
    ns: str,
) -> None:
    await create(admin_d, endpoint, "ok", ns, forward_signature_metadata=True)
    body = b"MessageSid=SM1&Body=h%C3%A9llo+there"
    metadata = {"inboxd.signature.x-twilio-signature": "abc=", "inboxd.signature.url": "https://e/x", "hop": "1"}
    await inbox_d.Accept(
        accept_request(ns, "evt-1", body, content_type="application/x-www-form-urlencoded", metadata=metadata)
    )
    [got] = await endpoint.wait_for(1)
    assert got.verified and got.body == body
    assert got.headers["content-type"] == "application/x-www-form-urlencoded"
    assert got.headers["inboxd-signature-x-twilio-signature"] == "abc="
    assert got.headers["inboxd-signature-url"] == "https://e/x"
    assert "hop" not in got.headers
    await state_of(db, ns, "evt-1", "completed")


async def test_a_destination_deleted_while_its_post_is_in_flight_lets_the_answer_complete_the_event(
    admin_d: admin_pb2_grpc.InboxAdminServiceStub,
    inbox_d: inbox_pb2_grpc.InboxServiceStub,
    endpoint: Endpoint,
    db: Database,
    ns: str,
) -> None:
    release = asyncio.Event()

    async def held(request: web.Request) -> web.StreamResponse:
        await release.wait()
        return web.Response(status=200)

    endpoint.behaviours["held"] = held
    created = await create(admin_d, endpoint, "held", ns, timeout=seconds(10))
    await inbox_d.Accept(accept_request(ns, "evt-1"))
    await endpoint.wait_for(1)
    await admin_d.DeleteDestination(admin_pb2.DeleteDestinationRequest(name=created.destination.name, reason="gone"))
    await asyncio.sleep(0.5)  # the runner's looks see it deleted meanwhile
    release.set()
    await state_of(db, ns, "evt-1", "completed")


async def test_flow_control_binds_a_destination_as_it_binds_any_worker(
    admin_d: admin_pb2_grpc.InboxAdminServiceStub,
    inbox_d: inbox_pb2_grpc.InboxServiceStub,
    endpoint: Endpoint,
    db: Database,
    ns: str,
) -> None:
    release = asyncio.Event()

    async def held(request: web.Request) -> web.StreamResponse:
        await release.wait()
        return web.Response(status=200)

    endpoint.behaviours["held"] = held
    await admin_d.SetFlowControl(admin_pb2.SetFlowControlRequest(pattern=ns, max_in_flight=2, reason="downstream"))
    try:
        await create(admin_d, endpoint, "held", ns, timeout=seconds(10), concurrency=8)
        keys = [f"evt-{i}" for i in range(6)]
        for key in keys:
            await inbox_d.Accept(accept_request(ns, key))
        await endpoint.wait_for(2)
        await asyncio.sleep(1.0)  # the runner claims on (concurrency 8): the rule holds it at 2
        assert len(endpoint.received) == 2
        release.set()
        for key in keys:
            await state_of(db, ns, key, "completed")
    finally:
        await remove_rules(db, ns)
