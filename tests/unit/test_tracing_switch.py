"""Tracing's one switch (observability/tracing.py) and what it changes, with the real SDK and no database.

The rule decides from the OTEL_* variables alone; off, the handlers are
built exactly as without tracing and nothing records; on, a group commit's
flush is one span linked both ways with its callers', and log lines name
the span they were written in.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import format_span_id, format_trace_id, use_span

from inboxd.api.handlers import generic_handler
from inboxd.observability import tracing
from inboxd.observability.logs import JsonFormatter, log_fields
from inboxd.observability.tracing import TracingPlan, TracingSettingsError, tracing_plan
from inboxd.runtime.group_commit import Coalescer
from inboxd_client.v1 import inbox_pb2

INBOX_SERVICE = inbox_pb2.DESCRIPTOR.services_by_name["InboxService"]


@pytest.fixture
def recorded() -> Iterator[InMemorySpanExporter]:
    """Tracing on for one test, every span kept in memory as it ends."""
    exporter = InMemorySpanExporter()
    tracing.use_provider(TracerProvider(), SimpleSpanProcessor(exporter))
    try:
        yield exporter
    finally:
        tracing.stop_tracing()


@pytest.mark.parametrize(
    ("variables", "plan"),
    [
        ({}, None),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, TracingPlan(("otlp",))),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4317"}, TracingPlan(("otlp",))),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_TRACES_EXPORTER": "none"}, None),
        ({"OTEL_TRACES_EXPORTER": "console"}, TracingPlan(("console",))),
        ({"OTEL_TRACES_EXPORTER": " OTLP , console,otlp"}, TracingPlan(("otlp", "console"))),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "TRUE"}, None),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_SDK_DISABLED": "false"}, TracingPlan(("otlp",))),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "", "OTEL_TRACES_EXPORTER": ""}, None),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, TracingPlan(("otlp",), "grpc")),
        # Only OTLP has a protocol: a console exporter never asks for one.
        ({"OTEL_TRACES_EXPORTER": "console", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, TracingPlan(("console",))),
    ],
)
def test_the_variables_alone_say_whether_tracing_is_on(variables: dict[str, str], plan: TracingPlan | None) -> None:
    assert tracing_plan(variables) == plan


@pytest.mark.parametrize(
    ("variables", "named"),
    [
        ({"OTEL_TRACES_EXPORTER": "jaeger"}, "OTEL_TRACES_EXPORTER='jaeger': unknown exporter 'jaeger'"),
        ({"OTEL_TRACES_EXPORTER": "otlp,zipkin"}, "OTEL_TRACES_EXPORTER='otlp,zipkin': unknown exporter 'zipkin'"),
        (
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
            "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf: needs the opentelemetry-exporter-otlp-proto-http package",
        ),
        (
            # The traces' own variable wins, and is the one named.
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "thrift",
            },
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL='thrift'",
        ),
    ],
)
def test_a_variable_it_cannot_honour_is_refused_by_name(variables: dict[str, str], named: str) -> None:
    with pytest.raises(TracingSettingsError) as refused:
        tracing_plan(variables)
    assert str(refused.value).startswith(named)


def _unary_handler(handler: Any, method: str) -> Any:
    """The grpc method handler `handler` gives a call of `method` (its `.unary_unary` or `.stream_stream`)."""
    details = type("Details", (), {"method": f"/inboxd.v1.InboxService/{method}", "invocation_metadata": ()})()
    return handler.service(details)


def test_off_the_handlers_are_built_exactly_as_without_tracing() -> None:
    assert tracing.TRACER is None
    handler = _unary_handler(generic_handler(INBOX_SERVICE, object()), "Accept")
    assert handler.unary_unary.func.__qualname__ == "_wrap.<locals>.handle"
    stream = _unary_handler(generic_handler(INBOX_SERVICE, object()), "AcceptStream")
    assert stream.stream_stream.func.__qualname__ == "_wrap_stream.<locals>.handle"


def test_on_each_call_runs_inside_its_span(recorded: InMemorySpanExporter) -> None:
    handler = _unary_handler(generic_handler(INBOX_SERVICE, object()), "Accept")
    assert handler.unary_unary.func.__qualname__ == "traced_unary.<locals>.traced"
    stream = _unary_handler(generic_handler(INBOX_SERVICE, object()), "Work")
    assert stream.stream_stream.func.__qualname__ == "traced_stream.<locals>.traced"


def test_the_service_is_named_inboxd_unless_the_variables_name_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    for variables, expected in (
        ({}, "inboxd"),
        ({"OTEL_SERVICE_NAME": "inbox-eu"}, "inbox-eu"),
        ({"OTEL_RESOURCE_ATTRIBUTES": "service.name=from-resource,team=payments"}, "from-resource"),
    ):
        with monkeypatch.context() as env:
            for name, value in variables.items():
                env.setenv(name, value)
            tracing.start_tracing(TracingPlan(("console",)))
            try:
                assert tracing._provider is not None
                assert tracing._provider.resource.attributes["service.name"] == expected
            finally:
                tracing.stop_tracing()
    assert tracing.TRACER is None


async def _run(items: list[int]) -> list[int]:
    await asyncio.sleep(0)
    return items


async def test_off_a_submission_names_no_caller_and_nothing_records() -> None:
    coalescer: Coalescer[int, int] = Coalescer(_run, operation="accept_events")
    submitted = coalescer.submit_soon([1])
    assert [s.caller for s in coalescer._queue] == [None]
    assert await submitted == [1]


async def test_a_flushed_group_is_one_span_linked_both_ways_with_each_caller(recorded: InMemorySpanExporter) -> None:
    assert tracing.TRACER is not None
    coalescer: Coalescer[int, int] = Coalescer(_run, operation="accept_events", max_inflight=1)
    callers = [tracing.TRACER.start_span(f"caller {i}") for i in range(3)]
    answers = []
    # All three submitted before the flusher runs: one group.
    for number, caller in enumerate(callers):
        with use_span(caller, end_on_exit=False):
            answers.append(coalescer.submit_soon([number]))
    assert [await answer for answer in answers] == [[0], [1], [2]]
    for caller in callers:
        caller.end()

    spans: tuple[ReadableSpan, ...] = recorded.get_finished_spans()
    [group] = [s for s in spans if s.name == "accept_events"]
    assert group.attributes is not None
    assert dict(group.attributes) == {
        "db.system.name": "postgresql",
        "db.operation.name": "accept_events",
        "db.collection.name": "inbox_events",
        "inboxd.group.size": 3,
    }
    first, *others = callers
    assert group.parent is not None and group.parent.span_id == first.get_span_context().span_id
    assert [link.context.span_id for link in group.links] == [c.get_span_context().span_id for c in others]
    group_id = group.context.span_id if group.context is not None else None
    for finished in (s for s in spans if s.name.startswith("caller")):
        assert [link.context.span_id for link in finished.links] == [group_id]


def _formatted(message: str) -> dict[str, object]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("tests.tracing_switch")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        log_fields(logger, logging.INFO, message, trace_id="not a field of the line's own")
    finally:
        logger.removeHandler(handler)
    line: dict[str, object] = json.loads(stream.getvalue())
    return line


def test_a_log_line_names_the_span_recording_where_it_was_written(recorded: InMemorySpanExporter) -> None:
    assert tracing.TRACER is not None
    span = tracing.TRACER.start_span("work")
    with use_span(span, end_on_exit=True):
        inside = _formatted("inside")
    context = span.get_span_context()
    assert (inside["trace_id"], inside["span_id"]) == (
        format_trace_id(context.trace_id),
        format_span_id(context.span_id),
    )
    # A record's own field of that name never poses as the span's.
    assert inside["field_trace_id"] == "not a field of the line's own"
    outside = _formatted("outside")
    assert "trace_id" not in outside and "span_id" not in outside
