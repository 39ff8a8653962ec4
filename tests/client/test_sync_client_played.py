"""The sync client against grpc_testing's channel, which plays the server: no network, fake time.

Each test makes one client call in a thread while the test takes the request
the channel received, checks it, and answers with a response or a status. So
these tests see the exact request each method sends, the deadline it gives
gRPC, and what the client makes of each status code. Retries on UNAVAILABLE
are gRPC's own (a service-config retryPolicy): the fake channel does not run
them, so the tests check the policy the client hands gRPC, and that the client
itself never repeats a call.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import grpc_testing
import pytest
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from inboxd_client import (
    ClaimSuperseded,
    DeadlineExceeded,
    InboxClient,
    InboxError,
    InvalidArgument,
    ResourceExhausted,
    Unavailable,
)
from inboxd_client.errors import ERROR_BY_CODE
from inboxd_client.rpcs import ALL_RPCS
from inboxd_client.v1 import admin_pb2, inbox_pb2, types_pb2

SERVICES = (
    inbox_pb2.DESCRIPTOR.services_by_name["InboxService"],
    admin_pb2.DESCRIPTOR.services_by_name["InboxAdminService"],
)
METHODS: dict[str, MethodDescriptor] = {m.name: m for service in SERVICES for m in service.methods}
TOKEN = "ibx_played"
CLIENT_TIMEOUT = 7.5
# How long the test waits for the client to reach the channel: a bound on a hang, not a speed.
TAKE_WITHIN = 10.0
EVENT = inbox_pb2.ClaimedEvent(namespace="shop/acme", event_key="order-1", claim_token="ct-1", fencing_token=7)
FENCE: dict[str, Any] = {"namespace": "shop/acme", "event_key": "order-1", "claim_token": "ct-1"}
AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _duration(seconds: float) -> Duration:
    out = Duration()
    out.FromTimedelta(timedelta(seconds=seconds))
    return out


def _timestamp(at: datetime) -> Timestamp:
    out = Timestamp()
    out.FromDatetime(at)
    return out


@dataclass
class Case:
    """One client method: how to call it, the request it must send, and a response to answer with."""

    call: Callable[[InboxClient], Any]
    rpc: str
    request: Message
    response: Message
    timeout: float = CLIENT_TIMEOUT


CASES: dict[str, Case] = {
    "accept": Case(
        lambda c: c.accept(
            "shop/acme",
            "order-1",
            "order.paid",
            {"total": 12, "currency": "EUR"},
            metadata={"delivery": "d-9"},
            message_id="msg-1",
            ordering_key="order-1",
            revision=4,
            available_at=AT,
        ),
        "Accept",
        inbox_pb2.AcceptRequest(
            namespace="shop/acme",
            event_key="order-1",
            event_type="order.paid",
            payload=b'{"total":12,"currency":"EUR"}',
            metadata={"delivery": "d-9"},
            message_id="msg-1",
            ordering_key="order-1",
            revision=4,
            available_at=_timestamp(AT),
        ),
        inbox_pb2.AcceptResponse(outcome=inbox_pb2.ACCEPT_OUTCOME_ACCEPTED),
    ),
    "accept_batch": Case(
        lambda c: c.accept_batch(
            [inbox_pb2.AcceptRequest(namespace="n", event_key="a", event_type="t", payload=b"{}")], timeout=2.0
        ),
        "AcceptBatch",
        inbox_pb2.AcceptBatchRequest(
            events=[inbox_pb2.AcceptRequest(namespace="n", event_key="a", event_type="t", payload=b"{}")]
        ),
        inbox_pb2.AcceptBatchResponse(results=[inbox_pb2.AcceptResponse(outcome=inbox_pb2.ACCEPT_OUTCOME_DUPLICATE)]),
        timeout=2.0,
    ),
    "claim": Case(
        lambda c: c.claim(
            namespaces=["shop/acme"], event_types=["order.paid"], max_events=5, lease=45, wait=20, worker_id="w-1"
        ),
        "Claim",
        inbox_pb2.ClaimRequest(
            namespaces=["shop/acme"],
            event_types=["order.paid"],
            max_events=5,
            lease=_duration(45),
            wait=_duration(20),
            worker_id="w-1",
        ),
        inbox_pb2.ClaimResponse(events=[EVENT]),
        # A long-poll's deadline covers its wait, plus a margin: never the default 7.5 s.
        timeout=-1.0,
    ),
    "renew_lease": Case(
        lambda c: c.renew_lease(EVENT, lease=timedelta(minutes=2)),
        "RenewLease",
        inbox_pb2.RenewLeaseRequest(**FENCE, lease=_duration(120)),
        inbox_pb2.RenewLeaseResponse(lease_expires_at=_timestamp(AT)),
    ),
    "complete": Case(
        lambda c: c.complete(EVENT, disposition=types_pb2.DISPOSITION_IGNORED, reason="not ours"),
        "Complete",
        inbox_pb2.CompleteRequest(**FENCE, disposition=types_pb2.DISPOSITION_IGNORED, reason="not ours"),
        inbox_pb2.CompleteResponse(),
    ),
    "fail": Case(
        lambda c: c.fail(EVENT, "smtp 451", retry_after=30),
        "Fail",
        inbox_pb2.FailRequest(**FENCE, error="smtp 451", retry_after=_duration(30)),
        inbox_pb2.FailResponse(state=types_pb2.EVENT_STATE_PENDING),
    ),
    "fail_permanent": Case(
        lambda c: c.fail(EVENT, "no such account", permanent=True),
        "Fail",
        inbox_pb2.FailRequest(**FENCE, error="no such account", permanent=True),
        inbox_pb2.FailResponse(state=types_pb2.EVENT_STATE_DEAD_LETTERED),
    ),
    "release": Case(
        lambda c: c.release(EVENT),
        "Release",
        inbox_pb2.ReleaseRequest(**FENCE),
        inbox_pb2.ReleaseResponse(),
    ),
    "record_action_outcome": Case(
        lambda c: c.record_action_outcome(
            EVENT, "send-receipt:v1", types_pb2.ACTION_STATE_SUCCEEDED, external_ref="m-77", detail="sent"
        ),
        "RecordActionOutcome",
        inbox_pb2.RecordActionOutcomeRequest(
            **FENCE,
            action="send-receipt:v1",
            state=types_pb2.ACTION_STATE_SUCCEEDED,
            external_ref="m-77",
            detail="sent",
        ),
        inbox_pb2.RecordActionOutcomeResponse(
            action=types_pb2.ActionRecord(action="send-receipt:v1", state=types_pb2.ACTION_STATE_SUCCEEDED)
        ),
    ),
    "get_event": Case(
        lambda c: c.get_event("shop/acme", "order-1"),
        "GetEvent",
        admin_pb2.GetEventRequest(namespace="shop/acme", event_key="order-1"),
        admin_pb2.GetEventResponse(),
    ),
    "list_events": Case(
        lambda c: c.list_events("shop/acme", state=types_pb2.EVENT_STATE_DEAD_LETTERED, page_size=50, page_token="p2"),
        "ListEvents",
        admin_pb2.ListEventsRequest(
            namespace="shop/acme", state=types_pb2.EVENT_STATE_DEAD_LETTERED, page_size=50, page_token="p2"
        ),
        admin_pb2.ListEventsResponse(next_page_token="p3"),
    ),
    "replay": Case(
        lambda c: c.replay("shop/acme", "order-1", "fixed the template"),
        "Replay",
        admin_pb2.ReplayRequest(namespace="shop/acme", event_key="order-1", reason="fixed the template"),
        admin_pb2.ReplayResponse(),
    ),
    "stats": Case(
        lambda c: c.stats("shop/acme"),
        "Stats",
        admin_pb2.StatsRequest(namespace="shop/acme"),
        admin_pb2.StatsResponse(),
    ),
}


@dataclass
class Spy:
    """grpc_testing's channel, seen through what the client asks of it: deadlines and response types.

    grpc_testing drops a call's timeout and ignores (de)serializers, so this
    records both on their way in and hands the call on unchanged.
    """

    channel: Any
    timeouts: list[tuple[str, float | None]] = field(default_factory=list)
    deserializers: dict[str, Any] = field(default_factory=dict)

    def unary_unary(self, method: str, request_serializer: Any = None, response_deserializer: Any = None) -> Any:
        inner = self.channel.unary_unary(method)
        self.deserializers[method] = response_deserializer

        def call(request: Message, timeout: float | None = None, metadata: Any = None) -> Any:
            self.timeouts.append((method, timeout))
            return inner(request, timeout=timeout, metadata=metadata)

        return call

    def close(self) -> None:
        pass


@dataclass
class Played:
    """The client, the channel playing the server, and what the client gave gRPC when it opened the channel."""

    client: InboxClient
    channel: Any
    spy: Spy
    opened: list[tuple[str, list[tuple[str, Any]]]]

    def start(self, case: Case) -> Future[Any]:
        """Runs the client call in a thread of its own: it blocks until the test answers."""
        result: Future[Any] = Future()

        def run() -> None:
            try:
                result.set_result(case.call(self.client))
            except BaseException as exc:  # handed to the test, which asserts on it
                result.set_exception(exc)

        threading.Thread(target=run, daemon=True, name=f"client {case.rpc}").start()
        return result

    def take(self, rpc: str) -> tuple[dict[str, str], Message, Any]:
        """The call the client made: its metadata, its request, and the handle to answer it."""
        taken: list[Any] = []
        taker = threading.Thread(target=lambda: taken.append(self.channel.take_unary_unary(METHODS[rpc])), daemon=True)
        taker.start()
        taker.join(TAKE_WITHIN)
        assert taken, f"the client made no {rpc} call within {TAKE_WITHIN:.0f} s"
        metadata, request, handle = taken[0]
        return dict(metadata), request, handle


@pytest.fixture
def played(monkeypatch: pytest.MonkeyPatch) -> Iterator[Played]:
    channel = grpc_testing.channel(SERVICES, grpc_testing.strict_fake_time(0.0))
    spy = Spy(channel)
    opened: list[tuple[str, list[tuple[str, Any]]]] = []

    def insecure_channel(target: str, options: list[tuple[str, Any]] | None = None, **_: Any) -> Spy:
        opened.append((target, list(options or [])))
        return spy

    monkeypatch.setattr(grpc, "insecure_channel", insecure_channel)
    client = InboxClient("inboxd.test:50051", token=TOKEN, timeout=CLIENT_TIMEOUT)
    yield Played(client, channel, spy, opened)
    client.close()


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_method_sends_its_exact_request_with_the_token_and_returns_the_answer(played: Played, name: str) -> None:
    case = CASES[name]
    answer = played.start(case)
    metadata, request, handle = played.take(case.rpc)
    assert request == case.request
    assert metadata.get("authorization") == f"Bearer {TOKEN}"
    handle.terminate(case.response, (), grpc.StatusCode.OK, "")
    assert answer.result(TAKE_WITHIN) == case.response
    path = f"/{METHODS[case.rpc].containing_service.full_name}/{case.rpc}"
    assert played.spy.deserializers[path] == type(case.response).FromString


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_method_gives_grpc_its_deadline(played: Played, name: str) -> None:
    case = CASES[name]
    answer = played.start(case)
    _, _, handle = played.take(case.rpc)
    handle.terminate(case.response, (), grpc.StatusCode.OK, "")
    answer.result(TAKE_WITHIN)
    [(_, timeout)] = played.spy.timeouts
    if case.timeout < 0:  # Claim: its wait (20 s) plus a margin
        assert timeout is not None and timeout > 20.0
    else:
        assert timeout == case.timeout


@pytest.mark.parametrize("code", sorted(ERROR_BY_CODE, key=str))
def test_each_status_code_raises_its_own_error_with_the_servers_details(played: Played, code: grpc.StatusCode) -> None:
    case = CASES["complete"]
    answer = played.start(case)
    _, _, handle = played.take(case.rpc)
    handle.terminate(None, (), code, f"the server says {code.name}")
    with pytest.raises(InboxError) as raised:
        answer.result(TAKE_WITHIN)
    assert type(raised.value) is ERROR_BY_CODE[code]
    assert raised.value.details == f"the server says {code.name}"
    assert raised.value.method == "Complete"


@pytest.mark.parametrize(
    ("code", "error"),
    [
        (grpc.StatusCode.ABORTED, ClaimSuperseded),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, ResourceExhausted),
        (grpc.StatusCode.INVALID_ARGUMENT, InvalidArgument),
        (grpc.StatusCode.DEADLINE_EXCEEDED, DeadlineExceeded),
    ],
)
def test_the_codes_a_worker_acts_on_are_their_own_errors(
    played: Played, code: grpc.StatusCode, error: type[InboxError]
) -> None:
    case = CASES["record_action_outcome"]
    answer = played.start(case)
    played.take(case.rpc)[2].terminate(None, (), code, "no")
    with pytest.raises(error):
        answer.result(TAKE_WITHIN)


@pytest.mark.parametrize("name", sorted(CASES))
def test_unavailable_is_raised_after_one_call_the_client_never_repeats_it_itself(played: Played, name: str) -> None:
    case = CASES[name]
    answer = played.start(case)
    played.take(case.rpc)[2].terminate(None, (), grpc.StatusCode.UNAVAILABLE, "database unavailable")
    with pytest.raises(Unavailable):
        answer.result(TAKE_WITHIN)
    assert len(played.spy.timeouts) == 1, "the client repeated the call itself"


def test_grpc_retries_unavailable_only_for_the_rpcs_rpcs_py_marks_safe(played: Played) -> None:
    [(target, options)] = played.opened
    assert target == "inboxd.test:50051"
    settings = dict(options)
    assert settings["grpc.enable_retries"] == 1
    config = json.loads(settings["grpc.service_config"])
    [method_config] = config["methodConfig"]
    retried = {(name["service"], name["method"]) for name in method_config["name"]}
    assert retried == {(rpc.service, rpc.name) for rpc in ALL_RPCS if rpc.retry_safe}
    assert ("inboxd.v1.InboxService", "Claim") not in retried
    assert ("inboxd.v1.InboxService", "Fail") not in retried
    assert method_config["retryPolicy"]["retryableStatusCodes"] == ["UNAVAILABLE"]


def test_without_retries_grpc_is_given_no_retry_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[list[tuple[str, Any]]] = []

    def insecure_channel(target: str, options: list[tuple[str, Any]] | None = None, **_: Any) -> Spy:
        opened.append(list(options or []))
        return Spy(None)

    monkeypatch.setattr(grpc, "insecure_channel", insecure_channel)
    InboxClient("inboxd.test:50051", retry=None).close()
    assert json.loads(dict(opened[0])["grpc.service_config"]) == {"methodConfig": []}
