"""The Worker's spans against a real server, into the application's own tracer provider (the real SDK, in memory).

A handler's `process` span joins the trace its event's delivery started (a
child), or links to it (a replay, or a delivery more than an hour old); each
action is an `action` span under it; the handler's error is on its span.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, SpanKind, StatusCode

from inboxd_client import AsyncInboxClient, EventContext, PermanentError, SyncEventContext, Worker
from tests.client.helpers import eventually, running
from tests.client.tracing_support import app_exporter, worker_spans
from tests.conftest import FakeClock

# Each test runs on the Work stream and on unary Claims (tests/client/conftest.py).
pytestmark = pytest.mark.usefixtures("worker_path")


@pytest.fixture
def spans() -> InMemorySpanExporter:
    exporter = app_exporter()
    exporter.clear()
    return exporter


def ref(ns: str, key: str) -> str:
    return hashlib.sha256(f"{ns}\0{key}".encode()).hexdigest()[:12]


async def accept_in_span(client: AsyncInboxClient, ns: str, key: str) -> SpanContext:
    """Accepts under a span of the application's (the edge's request, say): its context rides the call."""
    with trace.get_tracer("tests.delivery").start_as_current_span("delivery") as delivery:
        await client.accept(ns, key, "test.event", {"id": key})
    return delivery.get_span_context()


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def of(spans: InMemorySpanExporter, name: str, ns: str) -> list[ReadableSpan]:
    found = [s for s in worker_spans(spans, name) if s.attributes and s.attributes["messaging.destination.name"] == ns]
    return sorted(found, key=lambda s: s.start_time or 0)


async def run_until(
    worker: Worker, done: Callable[[], bool], then: Callable[[], Awaitable[object]] | None = None
) -> None:
    async with running(worker):
        await eventually(done, "the worker did its work")
        if then is not None:
            await then()


async def test_a_handler_span_is_a_child_of_the_context_its_event_was_accepted_with(
    client: AsyncInboxClient, ns: str, spans: InMemorySpanExporter
) -> None:
    delivery = await accept_in_span(client, ns, "k")
    current: list[SpanContext] = []

    async def handle(ctx: EventContext) -> None:
        current.append(trace.get_current_span().get_span_context())

    worker = Worker(client, handle, namespaces=[ns], wait=1.0)
    await run_until(worker, lambda: worker.stats.completed == 1)

    (process,) = of(spans, "process", ns)
    assert process.context is not None and process.parent is not None
    assert (process.context.trace_id, process.parent.span_id) == (delivery.trace_id, delivery.span_id)
    assert process.kind is SpanKind.CONSUMER and not process.links
    assert current == [process.context]  # current in the handler: its own spans are children
    assert attrs(process) == {
        "messaging.system": "inboxd",
        "messaging.destination.name": ns,
        "messaging.message.id": ref(ns, "k"),  # never the raw key, the payload or the tokens
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "inboxd.event_type": "test.event",
        "inboxd.attempt": 1,
        "inboxd.replayed": False,
        "inboxd.stale": False,
        "inboxd.fencing_token": attrs(process)["inboxd.fencing_token"],
        "inboxd.trace.parent": "child",
    }
    assert process.status.status_code is StatusCode.UNSET


async def test_a_replayed_events_handler_span_is_a_new_root_linked_to_its_delivery(
    client: AsyncInboxClient, ns: str, spans: InMemorySpanExporter
) -> None:
    delivery = await accept_in_span(client, ns, "k")

    async def handle(ctx: EventContext) -> None:
        return None

    worker = Worker(client, handle, namespaces=[ns], wait=1.0)

    async def replay() -> None:
        await client.replay(ns, "k", "the receipt never went out")
        await eventually(lambda: worker.stats.completed == 2, "the replay handled")

    await run_until(worker, lambda: worker.stats.completed == 1, replay)

    first, second = of(spans, "process", ns)
    assert first.parent is not None and first.parent.span_id == delivery.span_id
    assert second.parent is None and second.context is not None
    assert second.context.trace_id != delivery.trace_id
    assert [link.context.span_id for link in second.links] == [delivery.span_id]
    assert attrs(second)["inboxd.replayed"] is True
    assert attrs(second)["inboxd.trace.parent"] == "link"
    assert attrs(first)["inboxd.fencing_token"] < attrs(second)["inboxd.fencing_token"]


@pytest.mark.parametrize(("minutes", "joins"), [(59, "child"), (61, "link")])
async def test_a_delivery_older_than_an_hour_is_linked_not_extended(
    clocked_client: AsyncInboxClient,
    ns: str,
    clock: FakeClock,
    spans: InMemorySpanExporter,
    minutes: int,
    joins: str,
) -> None:
    delivery = await accept_in_span(clocked_client, ns, "k")
    clock.advance(minutes * 60)  # the server's clock and the worker's: the event waited that long

    async def handle(ctx: EventContext) -> None:
        return None

    worker = Worker(clocked_client, handle, namespaces=[ns], wait=0.5, clock=clock)
    await run_until(worker, lambda: worker.stats.completed == 1)

    (process,) = of(spans, "process", ns)
    assert attrs(process)["inboxd.trace.parent"] == joins
    if joins == "child":
        assert process.parent is not None and process.parent.span_id == delivery.span_id
        assert not process.links
    else:
        assert process.parent is None
        assert [link.context.span_id for link in process.links] == [delivery.span_id]


async def test_an_event_accepted_without_a_trace_gets_a_root_span_of_its_own(
    client: AsyncInboxClient, ns: str, spans: InMemorySpanExporter
) -> None:
    await client.accept(ns, "k", "test.event", {})

    async def handle(ctx: EventContext) -> None:
        return None

    worker = Worker(client, handle, namespaces=[ns], wait=1.0)
    with trace.get_tracer("tests.app").start_as_current_span("the app runs its worker"):
        await run_until(worker, lambda: worker.stats.completed == 1)

    (process,) = of(spans, "process", ns)
    assert process.parent is None and not process.links  # never the worker's ambient span
    assert "inboxd.trace.parent" not in attrs(process)


async def test_each_action_is_a_child_span_with_its_name_key_and_outcome(
    client: AsyncInboxClient, ns: str, spans: InMemorySpanExporter
) -> None:
    await accept_in_span(client, ns, "k")
    keys: dict[str, str] = {}

    async def send(key: str) -> str:
        keys["send:v1"] = key
        return "msg-1"

    async def refused(key: str) -> str:
        keys["charge:v1"] = key
        raise ValueError("card declined")

    async def timed_out(key: str) -> str:
        keys["ship:v1"] = key
        raise TimeoutError("the shipper did not answer")

    async def handle(ctx: EventContext) -> None:
        await ctx.run_action("send:v1", send)
        again = await ctx.run_action("send:v1", send)  # the ledger holds its success: not run again
        assert not again.ran
        with pytest.raises(ValueError, match="declined"):
            await ctx.run_action("charge:v1", refused)
        try:
            await ctx.run_action("ship:v1", timed_out)
        except TimeoutError as exc:
            raise PermanentError("shipping is uncertain: an operator looks it up") from exc

    worker = Worker(client, handle, namespaces=[ns], wait=1.0)
    await run_until(worker, lambda: worker.stats.dead_lettered == 1)

    (process,) = of(spans, "process", ns)
    actions = of(spans, "action", ns)
    assert process.context is not None
    assert [a.parent.span_id if a.parent else None for a in actions] == [process.context.span_id] * 4
    assert {a.kind for a in actions} == {SpanKind.INTERNAL}
    seen = [
        (
            attrs(a)["inboxd.action.name"],
            attrs(a)["inboxd.action.idempotency_key"],
            attrs(a)["inboxd.action.outcome"],
            attrs(a).get("inboxd.action.reused", False),
            a.status.status_code,
        )
        for a in actions
    ]
    assert seen == [
        ("send:v1", keys["send:v1"], "SUCCEEDED", False, StatusCode.UNSET),
        ("send:v1", keys["send:v1"], "SUCCEEDED", True, StatusCode.UNSET),
        ("charge:v1", keys["charge:v1"], "FAILED", False, StatusCode.ERROR),
        ("ship:v1", keys["ship:v1"], "UNKNOWN", False, StatusCode.ERROR),
    ]
    assert all(attrs(a)["messaging.message.id"] == ref(ns, "k") for a in actions)
    # The handler's failure is on its span, with the exception.
    assert process.status.status_code is StatusCode.ERROR
    assert [e.attributes["exception.type"] for e in process.events if e.attributes] == [
        "inboxd_client.outcomes.PermanentError"
    ]


async def test_a_sync_handler_runs_under_its_span_in_its_thread(
    client: AsyncInboxClient, ns: str, spans: InMemorySpanExporter
) -> None:
    await accept_in_span(client, ns, "k")
    current: list[SpanContext] = []

    def handle(ctx: SyncEventContext) -> None:
        current.append(trace.get_current_span().get_span_context())
        ctx.run_action("send:v1", lambda key: "msg-1")

    worker = Worker(client, handle, namespaces=[ns], wait=1.0)
    await run_until(worker, lambda: worker.stats.completed == 1)

    (process,) = of(spans, "process", ns)
    (action,) = of(spans, "action", ns)
    assert current == [process.context]
    assert action.parent is not None and process.context is not None
    assert action.parent.span_id == process.context.span_id
    assert attrs(action)["inboxd.action.outcome"] == "SUCCEEDED"
