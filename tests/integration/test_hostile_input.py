"""Hostile input: random and malicious strings, bytes, sizes and numbers against every data-plane RPC.

Every answer must be OK or a documented error code, never INTERNAL or
UNKNOWN, and nothing stored may break a later read. Hypothesis drives a
real server process through a blocking channel.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inboxd_client.v1 import inbox_pb2, inbox_pb2_grpc
from tests.harness import ServerProcess

DOCUMENTED = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.ABORTED,
    grpc.StatusCode.FAILED_PRECONDITION,
}
PREFIX = f"hostile-{uuid.uuid4().hex[:8]}/"
CASES = settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))

nasty_text = st.one_of(
    st.text(max_size=40),
    st.text(min_size=500, max_size=600),
    st.sampled_from(["", "\x00", "a\x00b", "' OR 1=1 --", "%", "_", "\\", "*", "é" * 300, "🙂" * 129, "\u202e"]),
)
# Mostly-valid values, so the checks behind the first field are reached too.
valid_text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=20)
maybe_nasty = st.one_of(valid_text, valid_text, nasty_text)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
)
json_values = st.recursive(
    json_scalars,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=12,
)
payloads = st.one_of(
    json_values.map(lambda v: json.dumps(v).encode()),
    json_values.map(lambda v: json.dumps(v).encode()),
    json_values.map(lambda v: json.dumps(v, ensure_ascii=False).encode()),
    st.binary(max_size=64),
    st.sampled_from(
        [
            b'{"a": "\\u0000"}',
            b'["\\ud800"]',
            b'{"a": 1, "a": "\\u0000"}',
            b"1e131072",
            b"0e1073741823",
            b"NaN",
            b"[" * 5000,
            b"\xef\xbb\xbf{}",
            b'{"n": 1e-16384}',
        ]
    ),
)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)


@pytest.fixture(scope="module")
def blocking_channel(database_url: str) -> Iterator[grpc.Channel]:
    server = ServerProcess(database_url=database_url).start()
    try:
        with grpc.insecure_channel(server.target) as channel:
            yield channel
    finally:
        server.kill()


@pytest.fixture(scope="module")
def stub(blocking_channel: grpc.Channel) -> inbox_pb2_grpc.InboxServiceStub:
    return inbox_pb2_grpc.InboxServiceStub(blocking_channel)


accepted: set[str] = set()


def answer_code(call: Any, request: Any) -> grpc.StatusCode:
    try:
        call(request, timeout=30)
    except grpc.RpcError as exc:
        code: grpc.StatusCode = exc.code()
        assert code in DOCUMENTED, f"{code}: {exc.details()}"
        return code
    return grpc.StatusCode.OK


@st.composite
def accept_requests(draw: st.DrawFn) -> inbox_pb2.AcceptRequest:
    request = inbox_pb2.AcceptRequest(
        namespace=PREFIX + draw(maybe_nasty),
        event_key=draw(maybe_nasty),
        event_type=draw(maybe_nasty),
        payload=draw(payloads),
        metadata=draw(st.dictionaries(maybe_nasty, maybe_nasty, max_size=3)),
        message_id=draw(maybe_nasty),
        ordering_key=draw(maybe_nasty),
        revision=draw(int64),
    )
    if draw(st.booleans()):
        request.available_at.seconds = draw(st.integers(-(2**40), 2**40))
        request.available_at.nanos = draw(int32)
    return request


@CASES
@given(request=accept_requests())
def test_accept_answers_only_documented_codes(stub: inbox_pb2_grpc.InboxServiceStub, request: Any) -> None:
    if answer_code(stub.Accept, request) == grpc.StatusCode.OK:
        accepted.add(request.namespace)


@CASES
@given(events=st.lists(accept_requests(), min_size=0, max_size=6))
def test_accept_batch_answers_only_documented_codes(stub: inbox_pb2_grpc.InboxServiceStub, events: list[Any]) -> None:
    if answer_code(stub.AcceptBatch, inbox_pb2.AcceptBatchRequest(events=events)) == grpc.StatusCode.OK:
        accepted.update(e.namespace for e in events)


@CASES
@given(
    namespaces=st.lists(nasty_text, max_size=3),
    event_types=st.lists(nasty_text, max_size=3),
    max_events=int32,
    lease=st.tuples(int64, int32),
    wait=st.one_of(st.tuples(st.just(0), st.integers(0, 5_000_000)), st.tuples(int64, int32)),
    worker_id=nasty_text,
)
def test_claim_answers_only_documented_codes(
    stub: inbox_pb2_grpc.InboxServiceStub,
    namespaces: list[str],
    event_types: list[str],
    max_events: int,
    lease: tuple[int, int],
    wait: tuple[int, int],
    worker_id: str,
) -> None:
    request = inbox_pb2.ClaimRequest(
        namespaces=[PREFIX + n for n in namespaces], event_types=event_types, max_events=max_events, worker_id=worker_id
    )
    request.lease.seconds, request.lease.nanos = lease
    request.wait.seconds, request.wait.nanos = wait
    if 0 < request.wait.seconds or request.wait.nanos > 5_000_000:
        request.wait.seconds, request.wait.nanos = 61, 0  # never really wait: out of range instead
    answer_code(stub.Claim, request)


@CASES
@given(
    rpc=st.sampled_from(["RenewLease", "Complete", "Fail", "Release", "RecordActionOutcome"]),
    namespace=nasty_text,
    event_key=nasty_text,
    claim_token=nasty_text,
    text=nasty_text,
    number=int32,
    duration=st.tuples(int64, int32),
    flag=st.booleans(),
)
def test_fenced_calls_answer_only_documented_codes(
    stub: inbox_pb2_grpc.InboxServiceStub,
    rpc: str,
    namespace: str,
    event_key: str,
    claim_token: str,
    text: str,
    number: int,
    duration: tuple[int, int],
    flag: bool,
) -> None:
    fence: dict[str, Any] = {"namespace": PREFIX + namespace, "event_key": event_key, "claim_token": claim_token}
    request: Any
    if rpc == "RenewLease":
        request = inbox_pb2.RenewLeaseRequest(**fence)
        request.lease.seconds, request.lease.nanos = duration
    elif rpc == "Complete":
        request = inbox_pb2.CompleteRequest(**fence, disposition=number % 5, reason=text)  # type: ignore[arg-type]
    elif rpc == "Fail":
        request = inbox_pb2.FailRequest(**fence, error=text, permanent=flag)
        request.retry_after.seconds, request.retry_after.nanos = duration
    elif rpc == "Release":
        request = inbox_pb2.ReleaseRequest(**fence)
    else:
        request = inbox_pb2.RecordActionOutcomeRequest(
            **fence,
            action=text,
            state=number % 6,  # type: ignore[arg-type]
            external_ref=text,
            detail=text,
        )
    answer_code(getattr(stub, rpc), request)


@CASES
@given(
    method=st.sampled_from(
        ["Accept", "AcceptBatch", "Claim", "RenewLease", "Complete", "Fail", "Release", "RecordActionOutcome"]
    ),
    body=st.binary(max_size=200),
)
def test_raw_bytes_answer_only_documented_codes(blocking_channel: grpc.Channel, method: str, body: bytes) -> None:
    call = blocking_channel.unary_unary(
        f"/inboxd.v1.InboxService/{method}", request_serializer=lambda b: b, response_deserializer=lambda b: b
    )
    if method == "Claim":
        # A random body may decode into a real long-poll; bound it by the deadline instead.
        try:
            call(body, timeout=2)
        except grpc.RpcError as exc:
            assert exc.code() in DOCUMENTED | {grpc.StatusCode.DEADLINE_EXCEEDED}, exc
        return
    answer_code(call, body)


def test_every_accepted_event_reads_back_cleanly(stub: inbox_pb2_grpc.InboxServiceStub, database_url: str) -> None:
    namespaces = sorted(accepted)
    assert namespaces, "the property tests above accepted nothing: they test too little"
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT inboxd_payload_json(e)::text, metadata::text, available_at FROM inbox_events AS e"
            " WHERE namespace = ANY(%s)",
            (namespaces,),
        ).fetchall()
    assert rows
    for payload, metadata, _ in rows:
        json.loads(payload)
        json.loads(metadata)
    # And through the API: everything due is claimable, its payload is JSON, and it completes.
    for start in range(0, len(namespaces), 50):
        while True:
            answer = stub.Claim(inbox_pb2.ClaimRequest(namespaces=namespaces[start : start + 50], max_events=100))
            if not answer.events:
                break
            for event in answer.events:
                json.loads(event.payload)
                stub.Complete(
                    inbox_pb2.CompleteRequest(
                        namespace=event.namespace, event_key=event.event_key, claim_token=event.claim_token
                    )
                )
