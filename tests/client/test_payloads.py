"""A handler's payload: its bytes as accepted, its content type, and `json()` only where the type is JSON.

The unit tests build contexts from ClaimedEvents; the worker tests accept
through the client and read what a real handler got back from a real server.
"""

from __future__ import annotations

import asyncio

import pytest

from inboxd.domain.validation import is_json_type
from inboxd.serving.server import RunningServer
from inboxd.store.database import Database
from inboxd_client import (
    AsyncInboxClient,
    EventContext,
    InboxClient,
    NotJsonPayload,
    PermanentError,
    SyncEventContext,
    Worker,
    accept_request,
)
from inboxd_client.payloads import is_json
from inboxd_client.v1 import inbox_pb2
from tests.client.helpers import eventually, read_event, running

FORM = b"Body=caf%C3%A9+%26+cr%C3%A8me&From=%2B15551234567&To=%2B15557654321"
# Every byte value, with what no UTF-8 decoder accepts (0xff, a lone 0x80): nothing may decode it.
BINARY = bytes(range(256)) + b"\xff\x80\x00"


def context(payload: bytes, content_type: str) -> EventContext:
    event = inbox_pb2.ClaimedEvent(namespace="ns", event_key="k", claim_token="t", payload=payload)
    event.content_type = content_type
    return EventContext(None, event)  # type: ignore[arg-type]  # no action is recorded here


@pytest.mark.parametrize(
    ("content_type", "json_type"),
    [
        ("application/json", True),
        ("Application/JSON; charset=utf-8", True),
        ("application/vnd.api+json", True),
        ("application/problem+json ; charset=UTF-8", True),
        ("", True),
        ("application/x-www-form-urlencoded", False),
        ("text/json", False),
        ("application/jsonp", False),
        ("text/xml", False),
        ("application/octet-stream", False),
        ("\tapplication/json ;q=1", True),
        ("x+json", False),
        ("+json", False),
        ("application/js on", False),
    ],
)
def test_json_types_are_application_json_and_plus_json_as_the_server_judges(content_type: str, json_type: bool) -> None:
    assert is_json(content_type) is json_type
    # The server validated the payload as JSON exactly when the client will parse it.
    assert is_json_type(content_type or "application/json") is json_type


def test_an_event_from_a_server_that_sends_no_content_type_is_json() -> None:
    ctx = context(b'{"a": 1}', "")
    assert (ctx.content_type, ctx.is_json, ctx.json()) == ("application/json", True, {"a": 1})


def test_json_parses_a_json_type_with_parameters_and_the_bytes_stay_as_accepted() -> None:
    body = b'{"b": 1,   "a": [2,3],"b2":"\\u00e9"}'
    ctx = context(body, "application/vnd.api+json; charset=utf-8")
    assert ctx.json() == {"b": 1, "a": [2, 3], "b2": "\u00e9"}
    assert ctx.payload == body
    assert ctx.content_type == "application/vnd.api+json; charset=utf-8"


def test_json_refuses_a_form_naming_its_content_type_and_dead_letters() -> None:
    ctx = context(FORM, "application/x-www-form-urlencoded")
    with pytest.raises(NotJsonPayload, match=r"'application/x-www-form-urlencoded', not JSON") as caught:
        ctx.json()
    assert isinstance(caught.value, PermanentError) and isinstance(caught.value, ValueError)
    assert caught.value.content_type == "application/x-www-form-urlencoded"
    assert (ctx.payload, ctx.is_json) == (FORM, False)


def test_accept_requests_carry_the_content_type_and_send_bytes_and_text_as_they_are() -> None:
    form = accept_request("ns", "k", "t", FORM.decode(), content_type="application/x-www-form-urlencoded")
    assert (form.payload, form.content_type) == (FORM, "application/x-www-form-urlencoded")
    binary = accept_request("ns", "k", "t", bytearray(BINARY), content_type="application/octet-stream")
    assert (binary.payload, binary.content_type) == (BINARY, "application/octet-stream")
    # Under a JSON type (the default) values are written as JSON, as they always were.
    default = accept_request("ns", "k", "t", {"a": "é"})
    assert (default.payload, default.content_type) == ('{"a":"é"}'.encode(), "")


def test_accept_refuses_a_value_it_cannot_write_under_a_non_json_type() -> None:
    with pytest.raises(TypeError, match=r"content type 'text/xml' must be bytes or str, not dict"):
        accept_request("ns", "k", "t", {"a": 1}, content_type="text/xml")


ODD_JSON = b'{"b": 1,   "a": [2,3],"b2":"\\u00e9", "b": 2}'


@pytest.mark.usefixtures("worker_path")
async def test_form_binary_and_json_events_reach_an_async_handler_byte_exact_with_their_types(
    client: AsyncInboxClient, ns: str
) -> None:
    seen: dict[str, tuple[bytes, str, bool]] = {}
    refusals: dict[str, str] = {}

    async def handle(ctx: EventContext) -> None:
        seen[ctx.event_key] = (ctx.payload, ctx.content_type, ctx.is_json)
        try:
            ctx.json()
        except NotJsonPayload as exc:
            refusals[ctx.event_key] = str(exc)

    await client.accept(ns, "form", "sms.received", FORM.decode(), content_type="application/x-www-form-urlencoded")
    await client.accept(ns, "binary", "file.uploaded", BINARY, content_type="application/octet-stream")
    await client.accept(ns, "json", "order.paid", ODD_JSON, content_type="application/json; charset=utf-8")
    worker = Worker(client, handle, namespaces=[ns], wait=1.0)
    async with running(worker):
        await eventually(lambda: worker.stats.completed == 3, "the three events completed")
    assert seen == {
        "form": (FORM, "application/x-www-form-urlencoded", False),
        "binary": (BINARY, "application/octet-stream", False),
        "json": (ODD_JSON, "application/json; charset=utf-8", True),
    }
    assert set(refusals) == {"form", "binary"}
    assert "'application/octet-stream', not JSON" in refusals["binary"]


async def test_a_sync_handler_gets_a_form_byte_exact_and_json_of_it_dead_letters_naming_the_type(
    client: AsyncInboxClient, db: Database, ns: str
) -> None:
    seen: list[tuple[bytes, str]] = []

    def handle(ctx: SyncEventContext) -> None:
        seen.append((ctx.payload, ctx.content_type))
        ctx.json()  # a handler written for JSON

    await client.accept(ns, "form", "sms.received", FORM, content_type="application/x-www-form-urlencoded")
    worker = Worker(client, handle, namespaces=[ns], wait=1.0)
    async with running(worker):
        await eventually(lambda: worker.stats.dead_lettered == 1, "the form event dead-lettered")
    assert seen == [(FORM, "application/x-www-form-urlencoded")]
    row = await read_event(db, ns, "form")
    assert (row["state"], row["attempt"]) == ("dead_lettered", 1)
    assert "'application/x-www-form-urlencoded', not JSON" in row["last_error"]


async def test_accept_stream_sends_a_form_and_claim_hands_it_back_byte_exact(client: AsyncInboxClient, ns: str) -> None:
    async with client.accept_stream() as stream:
        await stream.accept(ns, "form", "sms.received", FORM, content_type="application/x-www-form-urlencoded")
    [event] = (await client.claim(namespaces=[ns])).events
    assert (event.payload, event.content_type) == (FORM, "application/x-www-form-urlencoded")


async def test_the_sync_client_and_accept_batch_send_xml_and_text_byte_exact(server: RunningServer, ns: str) -> None:
    xml = b'<?xml version="1.0"?>\n<order id="1">caf\xc3\xa9</order>\n'

    def work() -> list[tuple[str, bytes, str]]:
        with InboxClient(f"127.0.0.1:{server.port}") as sync:
            sync.accept(ns, "xml", "t", xml, content_type="text/xml; charset=utf-8")
            sync.accept_batch([accept_request(ns, "text", "t", "plain  text\r\n", content_type="text/plain")])
            events = sync.claim(namespaces=[ns], max_events=2).events
            return sorted((e.event_key, e.payload, e.content_type) for e in events)

    assert await asyncio.to_thread(work) == [
        ("text", b"plain  text\r\n", "text/plain"),
        ("xml", xml, "text/xml; charset=utf-8"),
    ]
