"""An inboxd process SIGKILLed in the middle of a POST: the event is delivered again under a new claim.

`inboxd serve` runs as a subprocess with the destinations runner on. The
endpoint holds the first POST without answering; the moment it arrives the
process is SIGKILLed. A second process takes the claim over when its lease
(the destination's 2 s timeout + 5 s) has expired and POSTs again: the same
`webhook-id` (so the endpoint can dedupe), the next attempt, and the event
completed once, under the new claim.
"""

from __future__ import annotations

import asyncio
import signal

import grpc
from aiohttp import web

from inboxd.domain.destinations import webhook_id
from inboxd.store.database import Database
from inboxd_client.v1 import admin_pb2, admin_pb2_grpc, inbox_pb2_grpc
from tests.harness import ServerProcess
from tests.integration.destination_endpoint import Endpoint, destinations_removed, endpoint
from tests.integration.helpers import accept_request, read_event, seconds
from tests.integration.procs import poll

__all__ = ["destinations_removed", "endpoint"]

DELIVERING = {
    "INBOXD_DESTINATIONS_POLL": "200ms",
    "INBOXD_DESTINATIONS_ALLOW": "127.0.0.1/32",
    "INBOXD_DESTINATIONS_ALLOW_HTTP": "true",
}


async def test_a_process_killed_mid_post_is_fenced_and_the_event_goes_again_with_the_same_webhook_id(
    migrated_url: str, db: Database, endpoint: Endpoint, ns: str
) -> None:
    held = asyncio.Event()

    async def hold_the_first(request: web.Request) -> web.StreamResponse:
        if len(endpoint.on("hold")) == 1:
            held.set()
            await asyncio.sleep(60)
        return web.Response(status=200, text="got it")

    endpoint.behaviours["hold"] = hold_the_first
    first = ServerProcess(database_url=migrated_url, env=DELIVERING)
    second = ServerProcess(database_url=migrated_url, env=DELIVERING)
    await asyncio.to_thread(first.start)
    try:
        async with grpc.aio.insecure_channel(first.target) as chan:
            admin = admin_pb2_grpc.InboxAdminServiceStub(chan)
            created = await admin.CreateDestination(
                admin_pb2.CreateDestinationRequest(
                    name=f"crash-{ns[-12:]}", url=endpoint.url("hold"), namespace_pattern=ns,
                    timeout=seconds(2), reason="test",
                )
            )  # fmt: skip
            endpoint.secret = created.secret
            await inbox_pb2_grpc.InboxServiceStub(chan).Accept(accept_request(ns, "evt-1"))
            await asyncio.wait_for(held.wait(), 10.0)
        assert first.proc is not None
        first.proc.send_signal(signal.SIGKILL)
        assert await asyncio.to_thread(first.proc.wait, 10.0) == -signal.SIGKILL
        killed_claim = await read_event(db, ns, "evt-1")
        assert killed_claim["state"] == "processing"

        await asyncio.to_thread(second.start)

        async def completed() -> dict[str, object] | None:
            row = await read_event(db, ns, "evt-1")
            return row if row["state"] == "completed" else None

        row = await poll(completed, within=14.0)
    finally:
        first.kill()
        second.kill()

    posts = endpoint.on("hold")
    assert len(posts) == 2
    assert {p.headers["webhook-id"] for p in posts} == {webhook_id(ns, "evt-1")}
    assert [p.headers["inboxd-attempt"] for p in posts] == ["1", "2"]
    assert all(p.verified for p in posts)
    assert row["attempt"] == 2
    assert row["fencing_token"] > killed_claim["fencing_token"]
    attempts = await db.run(
        lambda conn: conn.execute(
            "SELECT fencing_token, outcome FROM inbox_delivery_attempts WHERE namespace = %s", (ns,)
        )
    )
    assert [tuple(r) for r in await attempts.fetchall()] == [(row["fencing_token"], "completed")]
