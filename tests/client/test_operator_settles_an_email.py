"""The uncertain email, end to end: the send times out, the event dead-letters, an operator settles it, one send.

The worker is the Python runtime with no reconcile hook, sending through the
fake email API, whose first answer comes after the worker's HTTP timeout: the
email went out, and the worker cannot know. Every later attempt refuses to
send again (ActionUnresolved) until the attempts run out. The operator looks
the send up at the provider, settles the action SUCCEEDED with its reference
(SettleAction) and replays the event: the runtime sees the action settled and
completes without sending.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta

import grpc
import pytest

from inboxd.config.settings import Settings
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd_client import AsyncInboxClient, EventContext, Worker
from inboxd_client.v1 import admin_pb2, admin_pb2_grpc, types_pb2
from tests.client.conftest import FAST_RETRY
from tests.client.fake_email_api import SEND_PATH, FakeEmailApi
from tests.client.helpers import eventually, read_event, running
from tests.conftest import NO_RESCUER

SEND = "send-welcome:v1"
HTTP_TIMEOUT = 0.2


@pytest.fixture(scope="module")
async def hasty_server(db: Database) -> AsyncIterator[RunningServer]:
    """Two attempts, retried within milliseconds: the uncertain event dead-letters at once."""
    settings = Settings(
        listen="127.0.0.1:0",
        max_attempts=2,
        backoff_base=timedelta(milliseconds=10),
        backoff_cap=timedelta(milliseconds=20),
        rescue_interval=NO_RESCUER,
    )
    running_server = await start_server(settings, db)
    yield running_server
    await running_server.stop(1.0)


@pytest.fixture
def slow_email_api() -> Iterator[FakeEmailApi]:
    # The send is recorded at once; its answer comes after the worker gave up waiting.
    api = FakeEmailApi(answer_delay=(HTTP_TIMEOUT * 3, HTTP_TIMEOUT * 3)).start()
    yield api
    api.stop()


async def test_an_operator_settles_an_uncertain_send_and_the_replayed_event_does_not_send_again(
    hasty_server: RunningServer, slow_email_api: FakeEmailApi, db: Database, ns: str
) -> None:
    api = slow_email_api

    def post(key: str, to: str) -> str:
        request = urllib.request.Request(
            api.url + SEND_PATH,
            data=json.dumps({"to": to}).encode(),
            headers={"Idempotency-Key": key, "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT) as answer:
            return str(json.load(answer)["id"])

    async def handle(ctx: EventContext) -> None:
        to = ctx.json()["email"]
        await ctx.run_action(SEND, lambda key: asyncio.to_thread(post, key, to))

    target = f"127.0.0.1:{hasty_server.port}"
    async with AsyncInboxClient(target, retry=FAST_RETRY, timeout=10.0) as client:
        await client.accept(ns, "user-1", "user.signed_up", {"email": "ada@example.com"})
        worker = Worker(client, handle, namespaces=[ns], wait=0.5, lease=5)
        async with running(worker), grpc.aio.insecure_channel(target) as channel:

            async def dead_lettered() -> bool:
                return str((await read_event(db, ns, "user-1"))["state"]) == "dead_lettered"

            async def completed() -> bool:
                return str((await read_event(db, ns, "user-1"))["state"]) == "completed"

            await eventually(dead_lettered, "the uncertain event dead-lettered", within=20)
            row = await read_event(db, ns, "user-1")
            assert "ActionUnresolved" in row["last_error"] and "pass reconcile=" in row["last_error"]
            assert (api.posts, api.sends_to()) == (1, {"ada@example.com": 1})

            # The operator sees the UNKNOWN action, finds the send at the provider, and settles it.
            admin = admin_pb2_grpc.InboxAdminServiceStub(channel)
            event = (await admin.GetEvent(admin_pb2.GetEventRequest(namespace=ns, event_key="user-1"))).event
            [seen] = event.actions
            assert seen.state == types_pb2.ACTION_STATE_UNKNOWN
            [sent] = api.sent.values()
            assert sent.key == seen.idempotency_key
            await admin.SettleAction(
                admin_pb2.SettleActionRequest(
                    namespace=ns,
                    event_key="user-1",
                    action=SEND,
                    outcome=types_pb2.ACTION_STATE_SUCCEEDED,
                    external_ref=sent.message_id,
                    reason="the provider's log shows the message delivered",
                    expected_state=seen.state,
                    expected_fencing_token=seen.fencing_token,
                )
            )
            await admin.Replay(admin_pb2.ReplayRequest(namespace=ns, event_key="user-1", reason="settled"))
            await eventually(completed, "the replayed event completed", within=20)

    assert (api.posts, api.sends_to()) == (1, {"ada@example.com": 1})
    row = await read_event(db, ns, "user-1")
    assert row["disposition"] == "applied"
