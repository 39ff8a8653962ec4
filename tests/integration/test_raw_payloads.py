"""Raw payloads end to end: any body kept byte for byte with its content type, JSON judged as JSON.

Each body goes in through Accept, AcceptBatch and AcceptStream and comes back
through Claim, the Work stream and GetEvent exactly as it was sent; repeats of
a JSON payload are judged as JSON values, of any other by their bytes.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import grpc
import pytest

from inboxd.store.database import Database
from inboxd_client.v1 import admin_pb2, inbox_pb2
from inboxd_client.v1.admin_pb2_grpc import InboxAdminServiceStub
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.integration.helpers import expect_status
from tests.integration.work_streams import Worker

ACCEPTED = inbox_pb2.ACCEPT_OUTCOME_ACCEPTED
DUPLICATE = inbox_pb2.ACCEPT_OUTCOME_DUPLICATE
CONFLICT = inbox_pb2.ACCEPT_OUTCOME_CONFLICT
INVALID = grpc.StatusCode.INVALID_ARGUMENT

# What jsonb would have changed: whitespace, key order, escapes (\u00e9, \/), a repeated key.
ODD_JSON = b'{"b": 1,   "a": [2,3],"b2":"\\u00e9", "url": "https:\\/\\/x.example\\/", "b": 2}\n'
BODIES: dict[str, tuple[bytes, str]] = {
    "json": (ODD_JSON, ""),
    "json-charset": (b'{ "z":0, "y" :1 }', "application/json; charset=utf-8"),
    "plus-json": (b'{"specversion" : "1.0","id":"e1"}', "application/cloudevents+json"),
    "form": (b"To=%2B15551234567&Body=hello+world&From=%2B1555&Body=again", "application/x-www-form-urlencoded"),
    "xml": (b'<?xml version="1.0"?>\n<event id="1"><a>x &amp; y</a></event>', "application/xml"),
    "text": ("héllo\r\n  world\t".encode(), "text/plain; charset=utf-8"),
    "binary": (bytes(range(256)) + b"\xff\xfe\x00", "application/octet-stream"),
    "not-json-as-text": (b'{"a": NaN, "b": "\\u0000"', "text/plain"),
}
VIAS = ["unary", "batch", "stream"]


def request(ns: str, key: str, body: bytes, content_type: str = "", **fields: Any) -> inbox_pb2.AcceptRequest:
    return inbox_pb2.AcceptRequest(
        namespace=ns, event_key=key, event_type=fields.pop("event_type", "raw.event"), payload=body,
        content_type=content_type, **fields,
    )  # fmt: skip


async def accept(inbox: InboxServiceStub, via: str, *requests: inbox_pb2.AcceptRequest) -> list[Any]:
    """Accepts `requests` by Accept (one call each), one AcceptBatch or one AcceptStream; their answers in order.

    Through the stream, an item's refusal comes back as its ItemStatus.
    """
    if via == "unary":
        return [await inbox.Accept(r) for r in requests]
    if via == "batch":
        return list((await inbox.AcceptBatch(inbox_pb2.AcceptBatchRequest(events=requests))).results)
    call = inbox.AcceptStream()
    for sequence, item in enumerate(requests):
        await call.write(inbox_pb2.AcceptStreamRequest(sequence=sequence, accept=item))
    got: dict[int, Any] = {}
    while len(got) < len(requests):
        answer = await call.read()
        got[answer.sequence] = answer.accepted if answer.HasField("accepted") else answer.error
    await call.done_writing()
    return [got[i] for i in range(len(requests))]


async def claimed_by_key(inbox: InboxServiceStub, ns: str, count: int) -> dict[str, inbox_pb2.ClaimedEvent]:
    answer = await inbox.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], max_events=100))
    assert len(answer.events) == count, answer
    return {e.event_key: e for e in answer.events}


def expected_type(content_type: str) -> str:
    return content_type or "application/json"


@pytest.mark.parametrize("via", VIAS)
async def test_every_body_comes_back_byte_for_byte_with_its_content_type_from_claim_and_get_event(
    inbox: InboxServiceStub, admin: InboxAdminServiceStub, ns: str, via: str
) -> None:
    answers = await accept(inbox, via, *(request(ns, key, body, ct) for key, (body, ct) in BODIES.items()))
    assert [a.outcome for a in answers] == [ACCEPTED] * len(BODIES), answers
    claimed = await claimed_by_key(inbox, ns, len(BODIES))
    for key, (body, content_type) in BODIES.items():
        assert claimed[key].payload == body, key
        assert claimed[key].content_type == expected_type(content_type), key
        event = (await admin.GetEvent(admin_pb2.GetEventRequest(namespace=ns, event_key=key))).event
        assert (event.payload, event.content_type) == (body, expected_type(content_type)), key


async def test_the_work_stream_pushes_every_body_byte_for_byte_with_its_content_type(
    work: InboxServiceStub, ns: str
) -> None:
    await accept(work, "batch", *(request(ns, key, body, ct) for key, (body, ct) in BODIES.items()))
    worker = Worker(work)
    await worker.subscribe([ns], credit=len(BODIES), worker_id="raw")
    pushed = {e.event_key: e for e in await worker.pushed(len(BODIES))}
    for key, (body, content_type) in BODIES.items():
        assert (pushed[key].payload, pushed[key].content_type) == (body, expected_type(content_type)), key
    await worker.call.done_writing()


@pytest.mark.parametrize("via", VIAS)
async def test_json_repeats_are_judged_as_json_values_and_the_first_bytes_stay(
    inbox: InboxServiceStub, ns: str, via: str
) -> None:
    original = b'{"id": "e1", "data": {"amount": 10, "tags": ["a", "b"]}}'
    reserialized = b'{"data":{"tags":["a","b"],"amount":10},\n "id":"\\u0065\\u0031"}'
    changed = b'{"id": "e1", "data": {"amount": 11, "tags": ["a", "b"]}}'
    await accept(inbox, via, request(ns, "k", original))
    await accept(inbox, via, request(ns, "v", b'{"specversion":"1.0","id":"x"}', "application/cloudevents+json"))
    answers = await accept(
        inbox,
        via,
        request(ns, "k", original),
        request(ns, "k", reserialized, "application/json; charset=utf-8"),
        request(ns, "k", changed),
        request(ns, "v", b'{ "id" : "x", "specversion" : "1.0" }', "application/cloudevents+json"),
        request(ns, "k", original, event_type="other.type"),
    )
    assert [a.outcome for a in answers] == [DUPLICATE, DUPLICATE, CONFLICT, DUPLICATE, CONFLICT]
    claimed = await claimed_by_key(inbox, ns, 2)
    assert claimed["k"].payload == original and claimed["k"].content_type == "application/json"


@pytest.mark.parametrize("via", VIAS)
async def test_other_repeats_are_judged_by_their_bytes_and_content_type_does_not_count(
    inbox: InboxServiceStub, admin: InboxAdminServiceStub, ns: str, via: str
) -> None:
    form = b"a=1&b=2"
    await accept(inbox, via, request(ns, "f", form, "application/x-www-form-urlencoded"))
    answers = await accept(
        inbox,
        via,
        request(ns, "f", form, "application/x-www-form-urlencoded"),
        request(ns, "f", form, "text/plain"),
        request(ns, "f", b"b=2&a=1", "application/x-www-form-urlencoded"),
        request(ns, "f", b"a=1&b=2 ", "application/x-www-form-urlencoded"),
    )
    assert [a.outcome for a in answers] == [DUPLICATE, DUPLICATE, CONFLICT, CONFLICT]
    asked = admin_pb2.GetEventRequest(namespace=ns, event_key="f", include_conflict_payloads=True)
    event = (await admin.GetEvent(asked)).event
    assert (event.payload, event.content_type) == (form, "application/x-www-form-urlencoded")
    assert [(c.payload, c.content_type, c.payload_sha256, c.payload_size) for c in event.conflicts] == [
        (body, "application/x-www-form-urlencoded", hashlib.sha256(body).digest(), len(body))
        for body in (b"b=2&a=1", b"a=1&b=2 ")
    ]


async def test_a_json_payload_repeated_under_another_type_is_judged_by_its_bytes(
    inbox: InboxServiceStub, ns: str
) -> None:
    await inbox.Accept(request(ns, "k", b'{"a": 1, "b": 2}'))
    same = await inbox.Accept(request(ns, "k", b'{"a": 1, "b": 2}', "text/plain"))
    reordered = await inbox.Accept(request(ns, "k", b'{"b": 2, "a": 1}', "text/plain"))
    assert (same.outcome, reordered.outcome) == (DUPLICATE, CONFLICT)


@pytest.mark.parametrize("content_type", ["", "application/json; charset=utf-8", "application/vnd.api+json"])
async def test_invalid_json_under_a_json_type_is_refused_through_every_accept(
    inbox: InboxServiceStub, ns: str, content_type: str
) -> None:
    bad = request(ns, "bad", b'{"a": 1,}', content_type)
    unary = await expect_status(inbox.Accept(bad), INVALID)
    assert (unary.details() or "").startswith("payload: is not JSON"), unary.details()
    batch = await expect_status(
        inbox.AcceptBatch(inbox_pb2.AcceptBatchRequest(events=[request(ns, "ok", b"1"), bad])), INVALID
    )
    assert (batch.details() or "").startswith("events[1].payload: is not JSON"), batch.details()
    [streamed] = await accept(inbox, "stream", bad)
    assert streamed.code == INVALID.value[0] and streamed.message.startswith("accept.payload: is not JSON"), streamed
    # The same bytes under a type that is not JSON are only bytes.
    as_text = await inbox.Accept(request(ns, f"as-text-{len(content_type)}", b'{"a": 1,}', "text/plain"))
    assert as_text.outcome == ACCEPTED
    # What jsonb cannot hold is refused as before, in the same words.
    nul = await expect_status(inbox.Accept(request(ns, "nul", b'{"a": "\\u0000"}', content_type)), INVALID)
    assert (nul.details() or "").startswith("payload: holds \\u0000"), nul.details()


@pytest.mark.parametrize(
    ("content_type", "problem"),
    [("text/" + "x" * 251, "is 256 bytes; the limit is 255"), ("text/plain\x00", "contains a NUL byte")],
)
async def test_a_bad_content_type_is_refused_naming_the_field_through_every_accept(
    inbox: InboxServiceStub, ns: str, content_type: str, problem: str
) -> None:
    bad = request(ns, "bad", b"x=1", content_type)
    unary = await expect_status(inbox.Accept(bad), INVALID)
    assert unary.details() == f"content_type: {problem}"
    batch = await expect_status(
        inbox.AcceptBatch(inbox_pb2.AcceptBatchRequest(events=[request(ns, "ok", b"1"), bad])), INVALID
    )
    assert batch.details() == f"events[1].content_type: {problem}"
    [streamed] = await accept(inbox, "stream", bad)
    assert (streamed.code, streamed.message) == (INVALID.value[0], f"accept.content_type: {problem}")


async def test_sql_users_read_json_payloads_as_jsonb_and_others_as_null(
    inbox: InboxServiceStub, db: Database, ns: str
) -> None:
    await accept(
        inbox,
        "batch",
        request(ns, "j", ODD_JSON),
        request(ns, "p", b'{"id":"x"}', "application/problem+json"),
        request(ns, "f", b"a=1", "application/x-www-form-urlencoded"),
    )

    async def read(conn: Any) -> dict[str, tuple[Any, bytes]]:
        cur = await conn.execute(
            "SELECT event_key, inboxd_payload_json(e), inboxd_payload(e) FROM inbox_events AS e WHERE namespace = %s",
            (ns,),
        )
        return {row[0]: (row[1], bytes(row[2])) for row in await cur.fetchall()}

    rows = await db.run(read)
    assert rows["j"] == (json.loads(ODD_JSON), ODD_JSON)
    assert rows["p"] == ({"id": "x"}, b'{"id":"x"}')
    assert rows["f"] == (None, b"a=1")


async def test_copies_of_a_new_key_in_one_batch_are_judged_against_the_one_inserted(
    inbox: InboxServiceStub, ns: str
) -> None:
    answers = await accept(
        inbox,
        "batch",
        request(ns, "j", b'{"a": 1, "b": [true]}'),
        request(ns, "j", b'{"b":[true],"a":1}'),
        request(ns, "f", b"x=1&y=2", "application/x-www-form-urlencoded"),
        request(ns, "f", b"x=1&y=2", "application/x-www-form-urlencoded"),
        request(ns, "f", b"y=2&x=1", "application/x-www-form-urlencoded"),
    )
    # One statement: the first copy of each key is inserted, the others judged against it.
    assert [a.outcome for a in answers] == [ACCEPTED, DUPLICATE, ACCEPTED, DUPLICATE, CONFLICT]
    claimed = await claimed_by_key(inbox, ns, 2)
    assert claimed["j"].payload == b'{"a": 1, "b": [true]}' and claimed["f"].payload == b"x=1&y=2"
