"""Accept and AcceptBatch refuse bad input with INVALID_ARGUMENT naming the field, and store nothing.

Every refusal goes through the real gRPC server to a real PostgreSQL. `expect_invalid` insists on
INVALID_ARGUMENT exactly, so no test here can pass while the server answers INTERNAL (or UNKNOWN).
"""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from inboxd.domain.errors import InvalidArgument
from inboxd.domain.validation import _check_payload_exactly
from inboxd.store.database import Connection, Database
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.integration.helpers import accept_request
from tests.integration.procs import stored_keys

MiB = 1024 * 1024
ACCEPTED = inbox_pb2.ACCEPT_OUTCOME_ACCEPTED
INVALID = grpc.StatusCode.INVALID_ARGUMENT

# google.protobuf.Timestamp's range: 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59.999999999Z.
FIRST_SECOND = -62135596800
LAST_SECOND = 253402300799


async def expect_invalid(call: Any, *fragments: str) -> str:
    """Awaits `call`; it must fail with INVALID_ARGUMENT whose details hold every fragment. Returns the details."""
    try:
        await call
    except grpc.aio.AioRpcError as exc:
        code, details = exc.code(), exc.details() or ""
    else:
        raise AssertionError(f"expected INVALID_ARGUMENT naming {fragments}, got OK")
    assert code != grpc.StatusCode.INTERNAL, f"bad input must never be INTERNAL: {details}"
    assert code == INVALID, f"expected INVALID_ARGUMENT, got {code.name}: {details}"
    for fragment in fragments:
        assert fragment in details, f"{details!r} does not name {fragment!r}"
    return details


def with_changes(request: inbox_pb2.AcceptRequest, changes: dict[str, Any]) -> inbox_pb2.AcceptRequest:
    for name, value in changes.items():
        if name == "metadata":
            request.metadata.update(value)
        elif name == "available_at":
            request.available_at.CopyFrom(value)
        else:
            setattr(request, name, value)
    return request


def identity_cases(field: str) -> list[Any]:
    return [
        pytest.param({field: ""}, field, id=f"{field}-empty"),
        pytest.param({field: "x" * 513}, field, id=f"{field}-513-bytes"),
        pytest.param({field: "é" * 257}, field, id=f"{field}-514-bytes-in-257-characters"),
        pytest.param({field: "a\x00b"}, field, id=f"{field}-nul"),
    ]


BAD_REQUESTS = [
    *identity_cases("namespace"),
    *identity_cases("event_key"),
    *identity_cases("event_type"),
    pytest.param({"payload": b""}, "payload", id="payload-empty"),
    pytest.param({"payload": b'{"a": "\xff\xfe"}'}, "payload", id="payload-not-utf8"),
    pytest.param({"payload": b"{not json"}, "payload", id="payload-not-json"),
    pytest.param({"payload": b'{"a": 1} trailing'}, "payload", id="payload-trailing-garbage"),
    # Two values: joined into one JSON array with its neighbours' payloads, it would shift them.
    pytest.param({"payload": b'{"a": 1}, {"b": 2}'}, "payload", id="payload-two-values"),
    pytest.param({"payload": b'{"a": "\x01"}'}, "payload", id="payload-raw-control-character"),
    pytest.param({"payload": b'{"a": "\x00"}'}, "payload", id="payload-raw-nul-byte"),
    pytest.param({"payload": b'{"a": "\\u0000"}'}, "payload", id="payload-nul-escape-in-value"),
    pytest.param({"payload": b'{"\\u0000": 1}'}, "payload", id="payload-nul-escape-in-key"),
    pytest.param({"payload": b'{"a": "\\ud800"}'}, "payload", id="payload-lone-high-surrogate"),
    pytest.param({"payload": b'["x\\udc00"]'}, "payload", id="payload-lone-low-surrogate"),
    pytest.param({"payload": b'{"n": 1e131072}'}, "payload", id="payload-number-beyond-numeric"),
    pytest.param({"payload": b'{"n": 1e-16384}'}, "payload", id="payload-number-too-many-fraction-digits"),
    pytest.param({"payload": b'{"n": 1e999999999999999999999}'}, "payload", id="payload-number-huge-exponent"),
    # PostgreSQL refuses any numeric literal whose exponent reaches INT_MAX / 2, even for zero.
    pytest.param({"payload": b'{"n": 0e1073741823}'}, "payload", id="payload-zero-with-exponent-numeric-refuses"),
    # Python's json keeps the last of duplicate keys; jsonb still parses (and refuses) the first.
    pytest.param({"payload": b'{"a": "\\u0000", "a": 1}'}, "payload", id="payload-nul-escape-in-overwritten-key"),
    pytest.param({"payload": b'{"a": "\\ud800", "a": 1}'}, "payload", id="payload-lone-surrogate-in-overwritten-key"),
    pytest.param({"payload": b'{"n": NaN}'}, "payload", id="payload-nan"),
    pytest.param({"payload": b'{"n": -Infinity}'}, "payload", id="payload-infinity"),
    pytest.param({"payload": b"[" * 100_000 + b"]" * 100_000}, "payload", id="payload-nested-100000-deep"),
    pytest.param({"payload": b'"' + b"a" * (MiB - 1) + b'"'}, "payload", id="payload-one-byte-over-1MiB"),
    pytest.param({"payload": b'"' + b"a" * (2 * MiB) + b'"'}, "payload", id="payload-2MiB"),
    pytest.param(
        {"available_at": Timestamp(seconds=LAST_SECOND + 1)}, "available_at", id="available_at-after-year-9999"
    ),
    pytest.param(
        {"available_at": Timestamp(seconds=FIRST_SECOND - 1)}, "available_at", id="available_at-before-year-1"
    ),
    pytest.param(
        {"available_at": Timestamp(seconds=0, nanos=1_000_000_000)}, "available_at", id="available_at-nanos-too-big"
    ),
    pytest.param({"available_at": Timestamp(seconds=0, nanos=-1)}, "available_at", id="available_at-negative-nanos"),
    pytest.param({"metadata": {"delivery_id": "d\x001"}}, "metadata", id="metadata-nul-in-value"),
    pytest.param({"metadata": {"deliv\x00ery": "d1"}}, "metadata", id="metadata-nul-in-key"),
    pytest.param({"metadata": {f"h{i}": "v" * 1024 for i in range(65)}}, "metadata", id="metadata-over-64KiB"),
    pytest.param({"message_id": "m" * 513}, "message_id", id="message_id-513-bytes"),
    pytest.param({"message_id": "m\x00"}, "message_id", id="message_id-nul"),
    pytest.param({"ordering_key": "o" * 513}, "ordering_key", id="ordering_key-513-bytes"),
    pytest.param({"ordering_key": "o", "revision": -1}, "revision", id="revision-negative"),
    pytest.param({"revision": -(2**63)}, "revision", id="revision-most-negative"),
]


@pytest.mark.parametrize(("changes", "field"), BAD_REQUESTS)
async def test_accept_refuses_bad_input_naming_the_field_and_stores_nothing(
    inbox: InboxServiceStub, db: Database, ns: str, changes: dict[str, Any], field: str
) -> None:
    request = with_changes(accept_request(ns, "evt-1"), changes)
    await expect_invalid(inbox.Accept(request), field)
    assert await stored_keys(db, ns) == set()


GOOD_EDGES = [
    pytest.param({"namespace": "n" * 512}, id="namespace-512-bytes"),
    pytest.param({"event_key": "k" * 512}, id="event_key-512-bytes"),
    pytest.param({"event_key": "é" * 256}, id="event_key-512-bytes-in-256-characters"),
    pytest.param({"event_type": "t" * 512}, id="event_type-512-bytes"),
    pytest.param({"message_id": "m" * 512, "ordering_key": "o" * 512}, id="message_id-and-ordering_key-512-bytes"),
    pytest.param({"payload": b'"' + b"a" * (MiB - 2) + b'"'}, id="payload-exactly-1MiB"),
    pytest.param({"payload": b'{"n": 1e131071, "m": 1e-16383}'}, id="payload-numbers-at-numerics-limits"),
    pytest.param({"payload": b'{"n": 0e1073741822}'}, id="payload-zero-with-the-largest-exponent-numeric-takes"),
    pytest.param({"payload": b'{"a": "\\ud83d\\ude00"}'}, id="payload-surrogate-pair"),
    pytest.param({"available_at": Timestamp(seconds=LAST_SECOND, nanos=999_999_999)}, id="available_at-last-instant"),
    pytest.param({"available_at": Timestamp(seconds=FIRST_SECOND)}, id="available_at-first-instant"),
    pytest.param({"ordering_key": "o", "revision": 0}, id="revision-zero-means-none"),
    pytest.param({"ordering_key": "o", "revision": 2**63 - 1}, id="revision-largest"),
]


@pytest.mark.parametrize("changes", GOOD_EDGES)
async def test_accept_takes_values_right_at_the_limits(
    inbox: InboxServiceStub, db: Database, ns: str, changes: dict[str, Any]
) -> None:
    request = with_changes(accept_request(ns, "evt-1"), changes)
    answer = await inbox.Accept(request)
    assert answer.outcome == ACCEPTED
    assert await stored_keys(db, request.namespace) == {request.event_key}


BAD_BATCH_EVENTS = [
    pytest.param({"event_key": ""}, "event_key", id="empty-event_key"),
    pytest.param({"namespace": "x" * 513}, "namespace", id="over-long-namespace"),
    pytest.param({"payload": b"{not json"}, "payload", id="payload-not-json"),
    pytest.param({"metadata": {"k": "\x00"}}, "metadata", id="metadata-nul"),
    pytest.param({"available_at": Timestamp(seconds=0, nanos=-5)}, "available_at", id="available_at-bad-nanos"),
    pytest.param({"payload": b'{"a": "\\u0000", "a": 1}'}, "payload", id="payload-nul-escape-in-overwritten-key"),
    pytest.param({"payload": b'{"n": NaN}'}, "payload", id="payload-nan"),
    pytest.param({"payload": b'{"n": 1e131072}'}, "payload", id="payload-number-beyond-numeric"),
    pytest.param({"payload": b'{"a": 1}, {"b": 2}'}, "payload", id="payload-two-values"),
]


@pytest.mark.parametrize(("changes", "field"), BAD_BATCH_EVENTS)
async def test_one_bad_event_rejects_the_whole_batch_naming_its_index(
    inbox: InboxServiceStub, db: Database, ns: str, changes: dict[str, Any], field: str
) -> None:
    events = [accept_request(ns, f"k{i}") for i in range(5)]
    with_changes(events[2], changes)
    await expect_invalid(inbox.AcceptBatch(inbox_pb2.AcceptBatchRequest(events=events)), "events[2]", field)
    assert await stored_keys(db, ns) == set()


@pytest.mark.parametrize(
    "payload",
    [b"{not json", b'{"n": NaN}', b'{"a": 1} trailing', b'{"n": 1e131072}', b"", b'{"a": 1}, {"b": 2}', b'["\x00"]'],
)
async def test_a_payload_postgresql_judges_is_refused_in_validations_words(
    inbox: InboxServiceStub, db: Database, ns: str, payload: bytes
) -> None:
    """The server leaves parsing to jsonb; a refusal still says why, as the exact check words it."""
    with pytest.raises(InvalidArgument) as exact:
        _check_payload_exactly("payload", payload.decode())
    single = with_changes(accept_request(ns, "one"), {"payload": payload})
    assert await expect_invalid(inbox.Accept(single)) == f"payload: {exact.value.problem}"
    events = [accept_request(ns, f"k{i}") for i in range(5)]
    with_changes(events[2], {"payload": payload})
    batch = inbox.AcceptBatch(inbox_pb2.AcceptBatchRequest(events=events))
    assert await expect_invalid(batch) == f"events[2].payload: {exact.value.problem}"
    assert await stored_keys(db, ns) == set()


async def test_an_empty_batch_is_refused(inbox: InboxServiceStub) -> None:
    await expect_invalid(inbox.AcceptBatch(inbox_pb2.AcceptBatchRequest()), "events")


async def test_a_batch_of_501_is_refused_and_stores_none(inbox: InboxServiceStub, db: Database, ns: str) -> None:
    batch = inbox_pb2.AcceptBatchRequest(events=[accept_request(ns, f"k{i}") for i in range(501)])
    await expect_invalid(inbox.AcceptBatch(batch), "events")
    assert await stored_keys(db, ns) == set()


def _raw(channel: grpc.aio.Channel, method: str) -> Any:
    """A call that sends the given bytes as they are, and hands back the answer's bytes undecoded."""
    return channel.unary_unary(
        f"/inboxd.v1.InboxService/{method}",
        request_serializer=lambda b: b,
        response_deserializer=lambda b: b,
    )


MALFORMED = [
    # field 1 (namespace), length 2, bytes that are not UTF-8
    pytest.param("Accept", b"\x0a\x02\xff\xfe", id="accept-namespace-not-utf8"),
    # a valid namespace, then field 2 (event_key) not UTF-8
    pytest.param("Accept", b"\x0a\x01n\x12\x02\xff\xfe", id="accept-event_key-not-utf8"),
    # field 5 (metadata): a map entry whose key (entry field 1) is not UTF-8
    pytest.param("Accept", b"\x2a\x06\x0a\x02\xff\xfe\x12\x00", id="accept-metadata-key-not-utf8"),
    # field 1 claims 5 bytes, 2 follow
    pytest.param("Accept", b"\x0a\x05ab", id="accept-truncated"),
    # field 1 (events): an AcceptRequest whose namespace is not UTF-8
    pytest.param("AcceptBatch", b"\x0a\x04\x0a\x02\xff\xfe", id="batch-event-namespace-not-utf8"),
]


@pytest.mark.parametrize(("method", "body"), MALFORMED)
async def test_a_request_that_does_not_decode_is_invalid_argument_not_unknown(
    channel: grpc.aio.Channel, method: str, body: bytes
) -> None:
    await expect_invalid(_raw(channel, method)(body))


async def test_the_raw_byte_path_itself_works_for_a_well_formed_request(
    channel: grpc.aio.Channel, db: Database, ns: str
) -> None:
    # The control for the malformed cases: the same plumbing with good bytes is answered OK.
    answer = await _raw(channel, "Accept")(accept_request(ns, "raw").SerializeToString())
    assert inbox_pb2.AcceptResponse.FromString(answer).outcome == ACCEPTED
    assert await stored_keys(db, ns) == {"raw"}


async def test_a_value_the_driver_refuses_past_validation_says_why_not_none(db: Database) -> None:
    # psycopg itself refuses a NUL in text; its error carries no diagnostic from the server.
    async def work(conn: Connection) -> None:
        await conn.execute("SELECT %s::text", ("a\x00b",))

    with pytest.raises(InvalidArgument) as refused:
        await db.run(work)
    assert "NUL (0x00) bytes" in str(refused.value)
    assert "None" not in str(refused.value)
