"""An event's trace context (DESIGN, Tracing): stored as its first Accept brought it, handed back on every claim.

The context comes from the AcceptRequest's trace_context field, else from the
call's `traceparent`/`tracestate` metadata; a repeat never replaces it. None
of this needs tracing to be on in the server: it is two strings of data.
"""

from __future__ import annotations

import grpc
import pytest

from inboxd_client.v1 import admin_pb2, inbox_pb2, types_pb2
from inboxd_client.v1.admin_pb2_grpc import InboxAdminServiceStub
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.integration.helpers import accept_request, expect_status
from tests.integration.test_accept_stream import answers_of, item
from tests.integration.test_claims import claim_one, fenced
from tests.integration.work_streams import Worker

ACCEPTED = inbox_pb2.ACCEPT_OUTCOME_ACCEPTED
DUPLICATE = inbox_pb2.ACCEPT_OUTCOME_DUPLICATE

FIRST = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
SECOND = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
THIRD = "00-5bf92f3577b34da6a3ce929d0e0e4736-10f067aa0ba902b7-00"


def traced(ns: str, key: str, traceparent: str, tracestate: str = "") -> inbox_pb2.AcceptRequest:
    request = accept_request(ns, key)
    request.trace_context.CopyFrom(types_pb2.TraceContext(traceparent=traceparent, tracestate=tracestate))
    return request


def context_of(event: inbox_pb2.ClaimedEvent) -> tuple[str, str] | None:
    if not event.HasField("trace_context"):
        return None
    return (event.trace_context.traceparent, event.trace_context.tracestate)


async def test_the_context_in_the_call_metadata_is_stored_and_handed_back_on_claim(
    inbox: InboxServiceStub, ns: str
) -> None:
    metadata = (("traceparent", FIRST), ("tracestate", "vendor=abc,other=1"))
    answer = await inbox.Accept(accept_request(ns, "k1"), metadata=metadata)
    assert answer.outcome == ACCEPTED
    event = await claim_one(inbox, ns)
    assert context_of(event) == (FIRST, "vendor=abc,other=1")
    assert not event.replayed


async def test_an_event_accepted_without_a_context_is_claimed_without_one(inbox: InboxServiceStub, ns: str) -> None:
    await inbox.Accept(accept_request(ns, "plain"))
    assert context_of(await claim_one(inbox, ns)) is None


async def test_the_field_wins_over_the_call_metadata(inbox: InboxServiceStub, ns: str) -> None:
    await inbox.Accept(traced(ns, "k1", SECOND), metadata=(("traceparent", FIRST),))
    assert context_of(await claim_one(inbox, ns)) == (SECOND, "")


async def test_a_repeat_keeps_the_first_deliverys_context(inbox: InboxServiceStub, ns: str) -> None:
    assert (await inbox.Accept(traced(ns, "k1", FIRST, "a=1"))).outcome == ACCEPTED
    assert (await inbox.Accept(traced(ns, "k1", SECOND, "b=2"))).outcome == DUPLICATE
    # A first delivery without a context stays without one: a later repeat's is not taken either.
    await inbox.Accept(accept_request(ns, "k2"))
    assert (await inbox.Accept(traced(ns, "k2", SECOND))).outcome == DUPLICATE
    claimed = (await inbox.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], max_events=10))).events
    assert {e.event_key: context_of(e) for e in claimed} == {"k1": (FIRST, "a=1"), "k2": None}


async def test_each_item_of_a_batch_keeps_its_own_context_and_the_rest_take_the_calls(
    inbox: InboxServiceStub, ns: str
) -> None:
    batch = inbox_pb2.AcceptBatchRequest(
        events=[traced(ns, "a", FIRST), accept_request(ns, "b"), traced(ns, "c", THIRD)]
    )
    await inbox.AcceptBatch(batch, metadata=(("traceparent", SECOND),))
    claimed = (await inbox.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], max_events=10))).events
    assert {e.event_key: context_of(e) for e in claimed} == {
        "a": (FIRST, ""),
        "b": (SECOND, ""),
        "c": (THIRD, ""),
    }


async def test_each_item_of_an_accept_stream_keeps_its_own_context(inbox: InboxServiceStub, ns: str) -> None:
    call = inbox.AcceptStream(metadata=(("traceparent", SECOND),))
    first = item(1, ns, "a")
    first.accept.trace_context.traceparent = FIRST
    await call.write(first)
    await call.write(item(2, ns, "b"))
    answers = await answers_of(call, 2)
    assert {answers[s].accepted.outcome for s in (1, 2)} == {ACCEPTED}
    await call.done_writing()
    claimed = (await inbox.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], max_events=10))).events
    assert {e.event_key: context_of(e) for e in claimed} == {"a": (FIRST, ""), "b": (SECOND, "")}


@pytest.mark.parametrize(
    "traceparent",
    [
        "not-a-traceparent",
        "00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01",  # upper case
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",  # zero trace id
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",  # zero span id
        "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",  # version ff
        FIRST + "-extra",  # version 00 has four fields
    ],
)
async def test_a_malformed_traceparent_field_is_refused_by_name_and_nothing_is_stored(
    inbox: InboxServiceStub, ns: str, traceparent: str
) -> None:
    error = await expect_status(inbox.Accept(traced(ns, "k", traceparent)), grpc.StatusCode.INVALID_ARGUMENT)
    assert "trace_context.traceparent" in (error.details() or "")
    assert list((await inbox.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], max_events=10))).events) == []


async def test_a_tracestate_over_its_bound_is_dropped_and_the_trace_and_the_event_kept(
    inbox: InboxServiceStub, ns: str
) -> None:
    answer = await inbox.Accept(traced(ns, "k", FIRST, "a=" + "x" * 600))
    assert answer.outcome == ACCEPTED
    assert context_of(await claim_one(inbox, ns)) == (FIRST, "")


async def test_a_tracestate_with_a_nul_is_refused_by_name(inbox: InboxServiceStub, ns: str) -> None:
    error = await expect_status(inbox.Accept(traced(ns, "k", FIRST, "a=\x00")), grpc.StatusCode.INVALID_ARGUMENT)
    assert "trace_context.tracestate" in (error.details() or "")


async def test_a_malformed_context_in_metadata_is_ignored_as_w3c_asks_and_the_event_accepted(
    inbox: InboxServiceStub, ns: str
) -> None:
    answer = await inbox.Accept(accept_request(ns, "k"), metadata=(("traceparent", "garbage"), ("tracestate", "a=1")))
    assert answer.outcome == ACCEPTED
    assert context_of(await claim_one(inbox, ns)) is None


async def test_a_future_version_with_more_fields_is_kept_verbatim(inbox: InboxServiceStub, ns: str) -> None:
    future = "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-what-comes-next"
    await inbox.Accept(traced(ns, "k", future))
    assert context_of(await claim_one(inbox, ns)) == (future, "")


async def test_a_replayed_event_says_so_and_keeps_its_context(
    inbox: InboxServiceStub, admin: InboxAdminServiceStub, ns: str
) -> None:
    await inbox.Accept(traced(ns, "k", FIRST))
    event = await claim_one(inbox, ns)
    assert not event.replayed
    await inbox.Complete(inbox_pb2.CompleteRequest(**fenced(event)))
    await admin.Replay(admin_pb2.ReplayRequest(namespace=ns, event_key="k", reason="the downstream lost it"))
    again = await claim_one(inbox, ns)
    assert again.replayed
    assert context_of(again) == (FIRST, "")


async def test_the_work_stream_pushes_the_stored_context(inbox: InboxServiceStub, ns: str) -> None:
    await inbox.Accept(traced(ns, "k", FIRST, "v=1"))
    worker = Worker(inbox)
    try:
        await worker.subscribe([ns], credit=1)
        [pushed] = await worker.pushed(1)
        assert context_of(pushed) == (FIRST, "v=1")
    finally:
        worker.call.cancel()


@pytest.mark.parametrize("tracestate", ["a=1\r\nx-injected: 1", "a=1\nb=2", "Upper=1", "a=\x1b[2J"])
async def test_a_tracestate_a_worker_could_not_re_emit_as_a_header_is_refused_by_name(
    inbox: InboxServiceStub, ns: str, tracestate: str
) -> None:
    error = await expect_status(inbox.Accept(traced(ns, "k", FIRST, tracestate)), grpc.StatusCode.INVALID_ARGUMENT)
    assert "trace_context.tracestate: is not a W3C tracestate" in (error.details() or "")


async def test_a_malformed_tracestate_in_metadata_is_dropped_and_the_trace_kept(
    inbox: InboxServiceStub, ns: str
) -> None:
    answer = await inbox.Accept(accept_request(ns, "k"), metadata=(("traceparent", FIRST), ("tracestate", "a=1 ,=x")))
    assert answer.outcome == ACCEPTED
    assert context_of(await claim_one(inbox, ns)) == (FIRST, "")


@pytest.mark.parametrize(
    "content_type", ["text/plain\r\nx-injected: 1", "text/plain; a=\x1b[2J", "json", "text/plain; charset=utf 8"]
)
async def test_a_content_type_that_is_not_an_rfc_9110_media_type_is_refused_by_name(
    inbox: InboxServiceStub, ns: str, content_type: str
) -> None:
    request = accept_request(ns, "k", b"hello", content_type=content_type)
    error = await expect_status(inbox.Accept(request), grpc.StatusCode.INVALID_ARGUMENT)
    assert "content_type: is not a media type" in (error.details() or "")


@pytest.mark.parametrize(
    "content_type",
    ['text/xml; charset="utf-8"', "application/json; charset=UTF-8;", "multipart/form-data; boundary=x-1"],
)
async def test_media_types_with_parameters_are_accepted_and_handed_back_as_sent(
    inbox: InboxServiceStub, ns: str, content_type: str
) -> None:
    payload = b"{}" if "json" in content_type else b"hello"
    assert (await inbox.Accept(accept_request(ns, "k", payload, content_type=content_type))).outcome == ACCEPTED
    assert (await claim_one(inbox, ns)).content_type == content_type
