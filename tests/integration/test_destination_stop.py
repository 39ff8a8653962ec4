"""A stopping server's destinations runner: a POST answered within the grace completes, one cut off is released.

A file of its own: no other server that delivers may be running meanwhile,
or it would take the released event.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

import grpc
from aiohttp import web

from inboxd.serving.server import start_server
from inboxd.store.database import Database
from inboxd_client.v1 import admin_pb2_grpc, inbox_pb2_grpc
from tests.integration.destination_endpoint import Endpoint, destinations_removed, endpoint
from tests.integration.helpers import accept_request, read_event, seconds
from tests.integration.test_destinations import DELIVERING, create

__all__ = ["destinations_removed", "endpoint"]


async def test_a_stopping_server_lets_a_post_be_answered_within_its_grace_and_releases_one_cut_off(
    db: Database, endpoint: Endpoint, ns: str
) -> None:
    release = asyncio.Event()

    async def held(request: web.Request) -> web.StreamResponse:
        if request.headers["inboxd-event-key"] == "quick":
            await asyncio.sleep(0.3)
            return web.Response(status=200)
        await release.wait()
        return web.Response(status=200)

    endpoint.behaviours["held"] = held
    running = await start_server(replace(DELIVERING, shutdown_grace=timedelta(seconds=1)), db)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as chan:
            admin = admin_pb2_grpc.InboxAdminServiceStub(chan)
            await create(admin, endpoint, "held", ns, timeout=seconds(30))
            inbox = inbox_pb2_grpc.InboxServiceStub(chan)
            await inbox.Accept(accept_request(ns, "slow"))
            await endpoint.wait_for(1)
            await inbox.Accept(accept_request(ns, "quick"))
            await endpoint.wait_for(2)
    finally:
        await running.stop(0.1)
        release.set()
    # Answered within the grace: completed. Cut off: released at once, its attempt given back.
    assert (await read_event(db, ns, "quick"))["state"] == "completed"
    slow = await read_event(db, ns, "slow")
    assert (slow["state"], slow["attempt"], slow["claim_token"]) == ("pending", 0, None)
