"""The server's spans (issue 31), from a real `inboxd serve` through the real OTLP/gRPC exporter to a real receiver.

One server process serves the whole module, with OTEL_EXPORTER_OTLP_ENDPOINT
at the receiver; each test sends its own traceparents (fresh ids) and looks
for the spans of its traces. Off by default, and refused at start when an
OTEL_* variable cannot be honoured: at the end.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from inboxd.observability.logs import event_ref
from inboxd_client.v1 import inbox_pb2, types_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.integration.helpers import accept_request
from tests.integration.procs import Serve, embedded_env
from tests.integration.test_accept_stream import answers_of
from tests.integration.work_streams import Worker, fence_of
from tests.tracing_support.otlp_receiver import OtlpReceiver, ReceivedSpan, otlp_receiver

INBOX = "inboxd.v1.InboxService"


@dataclass(frozen=True)
class Delivery:
    """A caller's span, as a traceparent names it."""

    trace_id: str
    span_id: str

    @property
    def traceparent(self) -> str:
        return f"00-{self.trace_id}-{self.span_id}-01"

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        return (("traceparent", self.traceparent),)

    @property
    def field(self) -> types_pb2.TraceContext:
        return types_pb2.TraceContext(traceparent=self.traceparent)


def delivery() -> Delivery:
    return Delivery(os.urandom(16).hex(), os.urandom(8).hex())


@dataclass
class Traced:
    receiver: OtlpReceiver
    serve: Serve
    inbox: InboxServiceStub

    async def span(self, matches: Callable[[ReceivedSpan], bool], what: str) -> ReceivedSpan:
        spans = await self.receiver.wait_for(lambda got: any(matches(s) for s in got), 15.0, what)
        [found] = [s for s in spans if matches(s)]
        return found


@pytest.fixture(scope="module")
async def traced(migrated_url: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Traced]:
    folder = tmp_path_factory.mktemp("traced")
    async with otlp_receiver() as receiver:
        env = embedded_env(
            folder,
            DATABASE_URL=migrated_url,
            INBOXD_LOG_LEVEL="debug",
            INBOXD_RESCUE_INTERVAL="0",
            INBOXD_BULK_POLL="0",
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
            OTEL_EXPORTER_OTLP_INSECURE="true",
            # Export within a tenth of a second rather than five: the tests wait on the receiver, not on a sleep.
            OTEL_BSP_SCHEDULE_DELAY="100",
        )
        for name in [k for k in env if k.startswith("OTEL_") and k not in _OURS]:
            del env[name]
        serve = Serve(env, folder / "inboxd.log", cwd=folder)
        try:
            await asyncio.to_thread(serve.start)
            async with grpc.aio.insecure_channel(serve.target) as channel:
                yield Traced(receiver, serve, InboxServiceStub(channel))
            assert await asyncio.to_thread(serve.terminate) == 0
        finally:
            serve.kill()


_OURS = {"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_INSECURE", "OTEL_BSP_SCHEDULE_DELAY"}


def _leaks(span: ReceivedSpan, *secrets: str) -> list[str]:
    """Attribute values that carry any of `secrets` (raw keys, payload text, tokens)."""
    values = [str(v) for v in span.attributes.values()]
    return [v for v in values for secret in secrets if secret in v]


async def test_an_accept_is_a_server_span_child_of_the_callers_with_the_events_attributes(
    traced: Traced, ns: str
) -> None:
    caller = delivery()
    key = "customer-42@example.com"
    answer = await traced.inbox.Accept(accept_request(ns, key, {"secret": "s3cr3t"}), metadata=caller.metadata)
    assert answer.outcome == inbox_pb2.ACCEPT_OUTCOME_ACCEPTED

    span = await traced.span(lambda s: s.trace_id == caller.trace_id and s.kind == "SERVER", "the Accept's span")
    assert span.name == f"{INBOX}/Accept"
    assert span.parent_span_id == caller.span_id
    assert span.service_name == "inboxd"
    assert span.attributes == {
        "rpc.system": "grpc",
        "rpc.service": INBOX,
        "rpc.method": "Accept",
        "rpc.grpc.status_code": 0,
        "messaging.system": "inboxd",
        "messaging.destination.name": ns,
        "messaging.message.id": event_ref(ns, key),
        "messaging.operation.type": "send",
        "messaging.operation.name": "accept",
        "inboxd.accept.outcome": "accepted",
    }
    assert span.status_code == "UNSET"
    assert _leaks(span, key, "s3cr3t") == []


async def test_a_group_commit_is_one_span_linked_both_ways_with_its_callers(traced: Traced, ns: str) -> None:
    callers = [delivery() for _ in range(8)]
    await asyncio.gather(
        *(traced.inbox.Accept(accept_request(ns, f"k{i}"), metadata=c.metadata) for i, c in enumerate(callers))
    )
    traces = {c.trace_id for c in callers}
    accepts = await traced.receiver.wait_for(
        lambda got: {s.trace_id for s in got if s.name == f"{INBOX}/Accept"} >= traces, 15.0, "the 8 Accept spans"
    )
    accept_spans = [s for s in accepts if s.trace_id in traces and s.name == f"{INBOX}/Accept"]
    groups: dict[str, ReceivedSpan] = {}
    for accept in accept_spans:
        [link] = [link for link in accept.links if link.attributes.get("inboxd.link") == "group_commit"]
        group = await traced.span(lambda s, link=link: s.span_id == link.span_id, "the group commit's span")  # type: ignore[misc]
        groups[group.span_id] = group
        # The group's span is the first caller's child and links to every other caller: it names each of them.
        assert group.parent_span_id == accept.span_id or group.links_to(accept.trace_id, accept.span_id)
    for group in groups.values():
        assert group.name == "accept_events"
        assert group.kind == "CLIENT"
        assert group.attributes["db.system.name"] == "postgresql"
        assert group.attributes["db.operation.name"] == "accept_events"
        assert group.attributes["db.collection.name"] == "inbox_events"
        assert group.attributes["inboxd.group.size"] == 1 + len(group.links)
    # One span per flushed group, never one per caller: eight callers in concurrency share at least one.
    assert sum(g.attributes["inboxd.group.size"] for g in groups.values()) == len(callers)


async def test_a_duplicates_span_links_to_the_first_deliverys_trace(traced: Traced, ns: str) -> None:
    first, second = delivery(), delivery()
    await traced.inbox.Accept(accept_request(ns, "k"), metadata=first.metadata)
    answer = await traced.inbox.Accept(accept_request(ns, "k"), metadata=second.metadata)
    assert answer.outcome == inbox_pb2.ACCEPT_OUTCOME_DUPLICATE
    conflict = await traced.inbox.Accept(accept_request(ns, "k", {"other": 1}), metadata=delivery().metadata)
    assert conflict.outcome == inbox_pb2.ACCEPT_OUTCOME_CONFLICT

    repeat = await traced.span(lambda s: s.trace_id == second.trace_id and s.kind == "SERVER", "the repeat's span")
    assert repeat.attributes["inboxd.accept.outcome"] == "duplicate"
    assert repeat.parent_span_id == second.span_id
    [link] = [link for link in repeat.links if link.attributes.get("inboxd.link") == "first_delivery"]
    assert (link.trace_id, link.span_id) == (first.trace_id, first.span_id)
    conflicted = await traced.span(
        lambda s: s.attributes.get("inboxd.accept.outcome") == "conflict" and s.links_to(first.trace_id),
        "the conflict's span",
    )
    assert conflicted.attributes["messaging.message.id"] == event_ref(ns, "k")


async def test_a_claims_hand_out_span_joins_the_delivery_and_links_to_the_claim(traced: Traced, ns: str) -> None:
    accepted, worker = delivery(), delivery()
    await traced.inbox.Accept(accept_request(ns, "k"), metadata=accepted.metadata)
    await traced.inbox.Accept(accept_request(ns, "untraced"))
    claim = await traced.inbox.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], max_events=10), metadata=worker.metadata)
    assert len(claim.events) == 2
    [event] = [e for e in claim.events if e.event_key == "k"]

    claim_span = await traced.span(lambda s: s.trace_id == worker.trace_id, "the Claim's span")
    assert claim_span.name == f"{INBOX}/Claim"
    assert claim_span.parent_span_id == worker.span_id
    assert claim_span.attributes["messaging.operation.name"] == "claim"
    assert claim_span.attributes["messaging.batch.message_count"] == 2
    receive = await traced.span(lambda s: s.trace_id == accepted.trace_id and s.name == "receive", "the hand-out")
    assert receive.kind == "CONSUMER"
    assert receive.parent_span_id == accepted.span_id
    assert receive.links_to(worker.trace_id, claim_span.span_id)
    assert receive.attributes == {
        "messaging.system": "inboxd",
        "messaging.destination.name": ns,
        "messaging.message.id": event_ref(ns, "k"),
        "messaging.operation.type": "receive",
        "messaging.operation.name": "receive",
        "inboxd.attempt": 1,
        "inboxd.replayed": False,
        "inboxd.fencing_token": event.fencing_token,
    }
    # The event accepted without a context has no hand-out span: nothing to join.
    spans = await traced.receiver.spans()
    assert [
        s for s in spans if s.name == "receive" and s.attributes["messaging.message.id"] == event_ref(ns, "untraced")
    ] == []
    # Its Complete is a span of the worker's trace, naming the event, never its claim token.
    await traced.inbox.Complete(inbox_pb2.CompleteRequest(**fence_of(event)), metadata=worker.metadata)
    complete = await traced.span(
        lambda s: s.trace_id == worker.trace_id and s.name == f"{INBOX}/Complete", "the Complete's span"
    )
    assert complete.attributes["messaging.operation.type"] == "settle"
    assert complete.attributes["messaging.message.id"] == event_ref(ns, "k")
    assert _leaks(complete, event.claim_token) == []


async def test_a_callers_mistake_is_its_code_not_an_error_of_the_server(traced: Traced, ns: str) -> None:
    caller = delivery()
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await traced.inbox.Accept(accept_request(ns, ""), metadata=caller.metadata)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    span = await traced.span(lambda s: s.trace_id == caller.trace_id, "the refused Accept's span")
    assert span.attributes["rpc.grpc.status_code"] == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert span.status_code == "UNSET"
    assert "inboxd.accept.outcome" not in span.attributes


async def test_each_accept_stream_item_is_a_span_of_its_own_delivery_linked_to_the_stream(
    traced: Traced, ns: str
) -> None:
    stream_caller, first, second = delivery(), delivery(), delivery()
    call = traced.inbox.AcceptStream(metadata=stream_caller.metadata)
    own = accept_request(ns, "own")
    own.trace_context.CopyFrom(first.field)
    await call.write(inbox_pb2.AcceptStreamRequest(sequence=1, accept=own))
    await call.write(inbox_pb2.AcceptStreamRequest(sequence=2, accept=accept_request(ns, "bare")))
    other = accept_request(ns, "own")
    other.trace_context.CopyFrom(second.field)
    await call.write(inbox_pb2.AcceptStreamRequest(sequence=3, accept=other))
    answers = await answers_of(call, 3)
    assert answers[3].accepted.outcome == inbox_pb2.ACCEPT_OUTCOME_DUPLICATE
    await call.done_writing()
    assert await call.code() == grpc.StatusCode.OK

    stream = await traced.span(
        lambda s: s.trace_id == stream_caller.trace_id and s.name == f"{INBOX}/AcceptStream", "the stream's span"
    )
    assert stream.parent_span_id == stream_caller.span_id
    item = await traced.span(lambda s: s.trace_id == first.trace_id and s.kind == "SERVER", "the first item's span")
    assert item.name == f"{INBOX}/Accept"
    assert item.parent_span_id == first.span_id
    assert item.links_to(stream.trace_id, stream.span_id)
    assert item.attributes["inboxd.stream"] == "AcceptStream"
    assert item.attributes["inboxd.stream.sequence"] == 1
    assert item.attributes["inboxd.accept.outcome"] == "accepted"
    # An item without a context of its own is a child of the stream's metadata context, as it is stored.
    bare = await traced.span(
        lambda s: s.attributes.get("messaging.message.id") == event_ref(ns, "bare") and s.kind == "SERVER",
        "the bare item's span",
    )
    assert (bare.trace_id, bare.parent_span_id) == (stream_caller.trace_id, stream_caller.span_id)
    repeat = await traced.span(lambda s: s.trace_id == second.trace_id and s.kind == "SERVER", "the repeat item")
    assert repeat.attributes["inboxd.accept.outcome"] == "duplicate"
    assert repeat.links_to(first.trace_id, first.span_id)


async def test_a_work_push_and_each_call_on_the_stream_are_spans_of_their_traces(traced: Traced, ns: str) -> None:
    accepted, stream_caller, handler = delivery(), delivery(), delivery()
    await traced.inbox.Accept(accept_request(ns, "k"), metadata=accepted.metadata)
    worker = Worker(traced.inbox, metadata=stream_caller.metadata)
    await worker.subscribe([ns], credit=1)
    [event] = await worker.pushed(1)
    result = await worker.ask(complete=inbox_pb2.CompleteRequest(**fence_of(event)), trace_context=handler.field)
    assert result.WhichOneof("result") == "complete", result
    assert await worker.close() == grpc.StatusCode.OK

    stream = await traced.span(
        lambda s: s.trace_id == stream_caller.trace_id and s.name == f"{INBOX}/Work", "the Work stream's span"
    )
    receive = await traced.span(lambda s: s.trace_id == accepted.trace_id and s.name == "receive", "the push")
    assert receive.parent_span_id == accepted.span_id
    assert receive.links_to(stream.trace_id, stream.span_id)
    complete = await traced.span(lambda s: s.trace_id == handler.trace_id and s.kind == "SERVER", "the call's span")
    assert complete.name == f"{INBOX}/Complete"
    assert complete.parent_span_id == handler.span_id
    assert complete.links_to(stream.trace_id, stream.span_id)
    assert complete.attributes["inboxd.stream"] == "Work"
    assert complete.attributes["rpc.grpc.status_code"] == 0
    [link] = [link for link in complete.links if link.attributes.get("inboxd.link") == "group_commit"]
    group = await traced.span(lambda s: s.span_id == link.span_id, "the completion's group commit")
    assert group.name == "complete_events"


async def test_log_lines_written_inside_a_span_carry_its_trace_and_span_ids(traced: Traced, ns: str) -> None:
    caller = delivery()
    await traced.inbox.Accept(accept_request(ns, "k"))
    claim = await traced.inbox.Claim(inbox_pb2.ClaimRequest(namespaces=[ns]), metadata=caller.metadata)
    [event] = claim.events
    await traced.inbox.Complete(inbox_pb2.CompleteRequest(**fence_of(event)), metadata=caller.metadata)
    complete = await traced.span(
        lambda s: s.trace_id == caller.trace_id and s.name == f"{INBOX}/Complete", "the Complete's span"
    )
    lines = [json.loads(line) for line in traced.serve.log_tail(400).splitlines() if line.startswith("{")]
    completed = [line for line in lines if line.get("msg") == "event completed" and line.get("namespace") == ns]
    assert completed, "no 'event completed' line for the namespace"
    assert {(line["trace_id"], line["span_id"]) for line in completed} == {(caller.trace_id, complete.span_id)}
    # Lines outside any span carry none.
    assert any("trace_id" not in line for line in lines)


# -- off by default, and refused when it cannot be honoured --

_OFF_SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from datetime import timedelta
    import grpc
    from inboxd.config.settings import Settings
    from inboxd.observability import tracing
    from inboxd.serving.server import start_server
    from inboxd.store.database import Database
    from inboxd_client.v1 import inbox_pb2, inbox_pb2_grpc

    async def main():
        db = Database(sys.argv[1], max_size=2)
        await db.open()
        tracing.start_tracing(tracing.tracing_plan())
        settings = Settings(listen="127.0.0.1:0", rescue_interval=timedelta(0), bulk_poll=timedelta(0))
        running = await start_server(settings, db)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = inbox_pb2_grpc.InboxServiceStub(channel)
            parent = (("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),)
            request = inbox_pb2.AcceptRequest(namespace=sys.argv[2], event_key="k", event_type="t", payload=b"{}")
            await stub.Accept(request, metadata=parent)
            claimed = await stub.Claim(inbox_pb2.ClaimRequest(namespaces=[sys.argv[2]]), metadata=parent)
            assert claimed.events[0].trace_context.traceparent == parent[0][1]
        await running.stop(1)
        await db.close()
        loaded = sorted(m for m in sys.modules if m.startswith(("opentelemetry.sdk", "opentelemetry.exporter")))
        print(repr((tracing.TRACER, loaded)))

    asyncio.run(main())
    """
)


def _without_otel(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_") and not k.startswith("INBOXD_")}
    env.update(extra)
    return env


def test_tracing_is_off_by_default_and_then_no_sdk_is_even_imported(migrated_url: str, ns: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _OFF_SCRIPT, migrated_url, ns],
        env=_without_otel(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # The stored context still travels (it is data), yet no tracer was made and the SDK never loaded.
    assert done.stdout.strip() == "(None, [])"


@pytest.mark.parametrize(
    ("variables", "says"),
    [
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER='zipkin': unknown exporter 'zipkin'"),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
            "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf: needs the opentelemetry-exporter-otlp-proto-http package",
        ),
        (
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"},
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL='http/json': inboxd exports OTLP over grpc or http/protobuf",
        ),
    ],
)
def test_a_tracing_variable_it_cannot_honour_refuses_the_start(
    tmp_path: Path, variables: dict[str, str], says: str
) -> None:
    env = _without_otel(INBOXD_DATA_DIR=str(tmp_path), INBOXD_LISTEN="127.0.0.1:0", **variables)
    done = subprocess.run(
        [sys.executable, "-m", "inboxd", "serve"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2, done.stderr
    assert f"inboxd: {says}" in done.stderr
    # Refused before the embedded PostgreSQL was even made.
    assert not (tmp_path / "PG_VERSION").exists()
