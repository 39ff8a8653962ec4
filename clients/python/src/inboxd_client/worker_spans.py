"""The worker's spans: `process` for each handler run, `action` for each external action.

Called only when `tracing.TRACER` is set, so OpenTelemetry is importable here.

The child-or-link rule: a handler's span is a child of the context the
event's first Accept brought when the event was not replayed and was
accepted less than `MAX_CHILD_AGE` before the handler starts, so the
delivery, its Accept, its hand-out and its processing are one trace.
Otherwise it is a new root with a link to that context: a replay is new
work an operator asked for, and a trace stretched over hours or days is one
no trace view shows well. No stored context: a new root.

Every span about an event carries the messaging attributes (the system, the
namespace as destination, the event's reference as message id: 12 hex
digits of sha256(namespace NUL key), the server's `event_ref`); never the
payload, the raw key, metadata, tokens or headers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from inboxd_client.v1 import inbox_pb2

if TYPE_CHECKING:
    from opentelemetry.util.types import AttributeValue

MAX_CHILD_AGE = timedelta(hours=1)
CHILD = "child"
LINK = "link"
SUCCEEDED, FAILED, UNKNOWN = "SUCCEEDED", "FAILED", "UNKNOWN"

_PROPAGATOR = TraceContextTextMapPropagator()

Clock = Callable[[], datetime]


def event_ref(namespace: str, event_key: str) -> str:
    """The event's reference in spans and logs, as the server computes it: its key is never exported."""
    return hashlib.sha256(namespace.encode("utf-8") + b"\0" + event_key.encode("utf-8")).hexdigest()[:12]


def event_attributes(event: inbox_pb2.ClaimedEvent) -> dict[str, AttributeValue]:
    return {
        "messaging.system": "inboxd",
        "messaging.destination.name": event.namespace,
        "messaging.message.id": event_ref(event.namespace, event.event_key),
    }


def stored_context(event: inbox_pb2.ClaimedEvent) -> trace.SpanContext | None:
    """The span context the event's first Accept brought, read by OpenTelemetry's propagator; None: none valid."""
    if not event.HasField("trace_context") or not event.trace_context.traceparent:
        return None
    carrier = {"traceparent": event.trace_context.traceparent, "tracestate": event.trace_context.tracestate}
    stored = trace.get_current_span(_PROPAGATOR.extract(carrier)).get_span_context()
    return stored if stored.is_valid else None


def joins_as_child(event: inbox_pb2.ClaimedEvent, now: datetime) -> bool:
    """The rule: not replayed, and accepted less than MAX_CHILD_AGE before `now` (a clock behind counts as fresh)."""
    if event.replayed:
        return False
    accepted = event.accepted_at.ToDatetime(tzinfo=UTC)
    return now - accepted < MAX_CHILD_AGE


def start_process(tracer: trace.Tracer, event: inbox_pb2.ClaimedEvent, clock: Clock) -> Span:
    """The CONSUMER span of one handler run, joined to the event's stored context by the child-or-link rule."""
    attributes = event_attributes(event)
    attributes.update(
        {
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "inboxd.event_type": event.event_type,
            "inboxd.attempt": event.attempt,
            "inboxd.replayed": event.replayed,
            "inboxd.stale": event.stale,
            "inboxd.fencing_token": event.fencing_token,
        }
    )
    stored = stored_context(event)
    parent = otel_context.Context()  # a root unless the rule says child: never the worker's own ambient span
    links: list[Link] = []
    if stored is not None:
        if joins_as_child(event, clock()):
            parent = trace.set_span_in_context(trace.NonRecordingSpan(stored))
            attributes["inboxd.trace.parent"] = CHILD
        else:
            links.append(Link(stored))
            attributes["inboxd.trace.parent"] = LINK
    return tracer.start_span("process", context=parent, kind=SpanKind.CONSUMER, attributes=attributes, links=links)


@contextmanager
def current(span: Span) -> Iterator[None]:
    """Makes `span` current (for the handler, the tasks it starts and the fenced calls it causes); never ends it."""
    with trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
        yield


def record_error(span: Span, error: BaseException) -> None:
    span.record_exception(error)
    span.set_status(Status(StatusCode.ERROR, type(error).__name__))


class ActionSpan:
    """The INTERNAL `action` span of one external action, current from its start until `end`."""

    def __init__(self, tracer: trace.Tracer, event: inbox_pb2.ClaimedEvent, name: str) -> None:
        attributes = event_attributes(event)
        attributes["inboxd.action.name"] = name
        self.span = tracer.start_span("action", kind=SpanKind.INTERNAL, attributes=attributes)
        # Attached here and detached in `end`, in the same task or thread: a scope's enter and exit.
        self._token = otel_context.attach(trace.set_span_in_context(self.span))

    def keyed(self, idempotency_key: str) -> None:
        self.span.set_attribute("inboxd.action.idempotency_key", idempotency_key)

    def end(self, outcome: str, *, reused: bool = False, error: BaseException | None = None) -> None:
        """Ends the span with the action's outcome: SUCCEEDED (`reused`: an earlier claim's), FAILED or UNKNOWN."""
        self.span.set_attribute("inboxd.action.outcome", outcome)
        if reused:
            self.span.set_attribute("inboxd.action.reused", True)
        if error is not None:
            record_error(self.span, error)
        otel_context.detach(self._token)
        self.span.end()


def log_ids() -> tuple[str, str] | None:
    """The current span's trace and span ids (hex) when it is recording, for a log line; else None."""
    context = trace.get_current_span()
    if not context.is_recording():
        return None
    ids = context.get_span_context()
    return trace.format_trace_id(ids.trace_id), trace.format_span_id(ids.span_id)
