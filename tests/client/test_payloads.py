"""A handler's payload: its bytes as accepted, its content type, and `json()` only where the type is JSON.

The unit tests build contexts from ClaimedEvents; the worker tests accept
through the client and read what a real handler got back from a real server.
"""

from __future__ import annotations

import pytest

from inboxd_client import (
    AsyncInboxClient,
    EventContext,
    NotJsonPayload,
    PermanentError,
    Worker,
    accept_request,
)
from inboxd_client.payloads import is_json
from inboxd_client.v1 import inbox_pb2
from tests.client.helpers import eventually, running

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
    ],
)
def test_json_types_are_application_json_and_plus_json_parameters_ignored(content_type: str, json_type: bool) -> None:
    assert is_json(content_type) is json_type


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


async def test_a_json_handler_gets_its_bytes_type_and_value(client: AsyncInboxClient, ns: str) -> None:
    seen: list[tuple[bytes, str, object]] = []

    async def handle(ctx: EventContext) -> None:
        seen.append((ctx.payload, ctx.content_type, ctx.json()))

    await client.accept(ns, "k", "t", {"n": 1}, content_type="application/json")
    worker = Worker(client, handle, namespaces=[ns], wait=1.0)
    async with running(worker):
        await eventually(lambda: worker.stats.completed == 1, "the JSON event completed")
    [(payload, content_type, value)] = seen
    assert (content_type, value) == ("application/json", {"n": 1})
    assert payload.replace(b" ", b"") == b'{"n":1}'
