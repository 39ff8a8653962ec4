"""What a traced caller's calls carry to the server: W3C context in metadata, and in stream messages' fields.

Checked where the server reads it: through a recording gRPC proxy in front of
the real server, or in the context the server stored with an accepted event.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span

from inboxd.serving.server import RunningServer
from inboxd_client import AsyncInboxClient, EventContext, InboxClient, Worker, accept_request
from inboxd_client.v1 import inbox_pb2, types_pb2
from tests.client.helpers import accept, eventually, running
from tests.client.recording_proxy import RecordingProxy, recording_proxy
from tests.client.tracing_support import app_exporter, worker_spans


@pytest.fixture
def spans() -> InMemorySpanExporter:
    exporter = app_exporter()
    exporter.clear()
    return exporter


@pytest.fixture
async def proxy(server: RunningServer) -> AsyncIterator[RecordingProxy]:
    async with recording_proxy(f"127.0.0.1:{server.port}") as recording:
        yield recording


def traceparent_of(span: Span | object) -> str:
    context = span.get_span_context() if isinstance(span, Span) else span.context  # type: ignore[attr-defined]
    ids = f"{trace.format_trace_id(context.trace_id)}-{trace.format_span_id(context.span_id)}"
    return f"00-{ids}-{context.trace_flags:02x}"


async def stored_traceparents(client: AsyncInboxClient, ns: str) -> dict[str, str]:
    """What the server stored per event key, as its claims hand it back."""
    claimed = await client.claim(namespaces=[ns], max_events=10)
    return {event.event_key: event.trace_context.traceparent for event in claimed.events}


@pytest.mark.usefixtures("worker_path")
async def test_a_handlers_fenced_calls_carry_its_span_to_the_server(
    client: AsyncInboxClient, proxy: RecordingProxy, spans: InMemorySpanExporter, ns: str, worker_path: str
) -> None:
    await accept(client, ns, "k")

    async def send(key: str) -> str:
        return "msg-1"

    async def handle(ctx: EventContext) -> None:
        await ctx.run_action("send:v1", send)

    async with AsyncInboxClient(f"127.0.0.1:{proxy.port}", timeout=10.0) as via_proxy:
        # Two slots: on unary Claims the next Claim long-polls while the handler runs, so the completion
        # goes alone (a CompleteBatch of one) rather than riding a Claim, the claim loop's call.
        worker = Worker(via_proxy, handle, namespaces=[ns], wait=1.0, concurrency=2)
        async with running(worker):
            await eventually(lambda: worker.stats.completed == 1, "the event completed")

    (process,) = [s for s in worker_spans(spans, "process") if (s.attributes or {}).get("inboxd.attempt") == 1]
    (action,) = worker_spans(spans, "action")
    if worker_path == "stream":
        sent = [inbox_pb2.WorkRequest.FromString(raw) for call in proxy.of("Work") for raw in call.requests]
        recorded = [m.trace_context.traceparent for m in sent if m.WhichOneof("call") == "record_action_outcome"]
        completed = [
            m.trace_context.traceparent
            for m in sent
            if m.WhichOneof("call") == "complete_batch" and m.complete_batch.completions[0].event_key == "k"
        ]
    else:
        recorded = [call.metadata.get("traceparent", "") for call in proxy.of("RecordActionOutcome")]
        completed = [
            call.metadata.get("traceparent", "")
            for call in proxy.of("CompleteBatch")
            if inbox_pb2.CompleteBatchRequest.FromString(call.requests[0]).completions[0].event_key == "k"
        ]
    # INTENDED and SUCCEEDED, under the action's span; the Complete under the handler's.
    assert recorded == [traceparent_of(action)] * 2
    assert completed == [traceparent_of(process)]


async def test_calls_outside_any_span_carry_no_trace_context(
    client: AsyncInboxClient, proxy: RecordingProxy, ns: str
) -> None:
    assert not trace.get_current_span().get_span_context().is_valid
    async with AsyncInboxClient(f"127.0.0.1:{proxy.port}", timeout=10.0) as via_proxy:
        await via_proxy.accept(ns, "k", "test.event", {})
        async with via_proxy.accept_stream() as stream:
            await stream.accept(ns, "s", "test.event", {})
    assert all("traceparent" not in call.metadata for call in proxy.calls)
    items = [
        inbox_pb2.AcceptStreamRequest.FromString(raw) for call in proxy.of("AcceptStream") for raw in call.requests
    ]
    assert [item.accept.HasField("trace_context") for item in items] == [False]
    assert await stored_traceparents(client, ns) == {"k": "", "s": ""}


async def test_the_sync_client_carries_its_threads_current_span(
    client: AsyncInboxClient, server: RunningServer, ns: str
) -> None:
    def deliver() -> str:
        with InboxClient(f"127.0.0.1:{server.port}") as sync_client:
            with trace.get_tracer("tests.edge").start_as_current_span("delivery") as delivery:
                sync_client.accept(ns, "k", "test.event", {})
            return traceparent_of(delivery)

    sent = await asyncio.to_thread(deliver)
    assert await stored_traceparents(client, ns) == {"k": sent}


async def test_each_accept_stream_item_carries_its_own_callers_span(
    client: AsyncInboxClient, proxy: RecordingProxy, ns: str
) -> None:
    tracer = trace.get_tracer("tests.edge")
    forwarded = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"  # a provider's, as the edge got it
    async with client.accept_stream() as stream:

        async def deliver(key: str) -> str:
            with tracer.start_as_current_span(f"delivery {key}") as delivery:
                await stream.accept(ns, key, "test.event", {"key": key})
            return traceparent_of(delivery)

        sent = await asyncio.gather(deliver("a"), deliver("b"))
        with tracer.start_as_current_span("not this one"):
            own = accept_request(ns, "c", "test.event", {})
            own.trace_context.CopyFrom(types_pb2.TraceContext(traceparent=forwarded))
            await stream.accept_request(own)
    assert await stored_traceparents(client, ns) == {"a": sent[0], "b": sent[1], "c": forwarded}
    assert not own.trace_context.tracestate  # the caller's request is its own: nothing added to it
