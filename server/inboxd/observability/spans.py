"""The server's spans and what each carries (semantic conventions for RPC and messaging); used only when tracing is on.

Every caller checks `tracing.TRACER` first: these functions assume it is set.
A span about an event names it as the logs do, by `event_ref` (a hash of its
namespace and key) in `messaging.message.id`; never the payload, the raw key,
metadata, tokens or claim tokens.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from inboxd.domain.trace_context import TraceContext
from inboxd.domain.vocabulary import AcceptOutcome, AcceptResult, ClaimedEvent
from inboxd.observability import tracing
from inboxd.observability.logs import event_ref

_PROPAGATOR = TraceContextTextMapPropagator()
MESSAGING_SYSTEM = "inboxd"
# A span whose RPC ended with one of these gRPC codes is an error of the server's (the RPC conventions' rule):
# UNKNOWN, DEADLINE_EXCEEDED, UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS. A caller's mistake is not.
SERVER_ERROR_CODES = frozenset({2, 4, 12, 13, 14, 15})
_REPEATS = frozenset({AcceptOutcome.DUPLICATE, AcceptOutcome.CONFLICT})

# Methods about one event, by name -> (messaging.operation.type, messaging.operation.name).
EVENT_OPERATIONS: dict[str, tuple[str, str]] = {
    "Accept": ("send", "accept"),
    "Complete": ("settle", "complete"),
    "Fail": ("settle", "fail"),
    "Release": ("settle", "release"),
    "RenewLease": ("settle", "renew_lease"),
    "RecordActionOutcome": ("settle", "record_action_outcome"),
}


def parent_of(context: TraceContext | None) -> Context:
    """An OpenTelemetry context whose span is the delivery's (remote) one; empty (a new root) for None."""
    if context is None:
        return Context()
    carrier = {"traceparent": context.traceparent}
    if context.tracestate:
        carrier["tracestate"] = context.tracestate
    return _PROPAGATOR.extract(carrier, Context())


def span_context_of(context: TraceContext) -> SpanContext:
    """The span a stored context names, to link to."""
    return trace.get_current_span(parent_of(context)).get_span_context()


def current_span() -> Span:
    return trace.get_current_span()


def rpc_attributes(path: str) -> dict[str, Any]:
    """`/inboxd.v1.InboxService/Accept` -> the RPC conventions' attributes."""
    service, _, method = path.lstrip("/").partition("/")
    return {"rpc.system": "grpc", "rpc.service": service, "rpc.method": method}


def event_attributes(namespace: str, event_key: str) -> dict[str, Any]:
    """What names one event on a span: the namespace as the destination, its reference as the message id."""
    return {
        "messaging.system": MESSAGING_SYSTEM,
        "messaging.destination.name": namespace,
        "messaging.message.id": event_ref(namespace, event_key),
    }


def about_request(attributes: dict[str, Any], method: str, request: Any) -> dict[str, Any]:
    """`attributes` with the event a request names (namespace and event_key), for the methods about one event."""
    operation = EVENT_OPERATIONS.get(method)
    if operation is not None and request.namespace:
        attributes.update(event_attributes(request.namespace, request.event_key))
        attributes["messaging.operation.type"], attributes["messaging.operation.name"] = operation
    return attributes


def start_server_span(name: str, parent: Context, attributes: Mapping[str, Any], links: Sequence[Link] = ()) -> Span:
    assert tracing.TRACER is not None
    return tracing.TRACER.start_span(
        name,
        context=parent,
        kind=SpanKind.SERVER,
        attributes=attributes,
        links=links,
        # The status is the RPC's code (end_rpc_span); an exception is recorded by the one who sees it.
        record_exception=False,
        set_status_on_exception=False,
    )


def set_rpc_code(span: Span, code: int, details: str = "") -> None:
    """The RPC's (or stream item's) gRPC status code; a server error's also sets the span's status."""
    span.set_attribute("rpc.grpc.status_code", code)
    if code in SERVER_ERROR_CODES:
        span.set_status(Status(StatusCode.ERROR, details or None))


def accept_answered(span: Span, result: AcceptResult) -> None:
    """Accept's outcome; a repeat links to its event's first delivery (the stored context), another trace."""
    span.set_attribute("inboxd.accept.outcome", result.outcome.value)
    if result.outcome in _REPEATS and result.trace_context is not None:
        span.add_link(span_context_of(result.trace_context), {"inboxd.link": "first_delivery"})


def batch_answered(span: Span, results: Sequence[AcceptResult]) -> None:
    """AcceptBatch: how many, and a link per repeat to its first delivery."""
    span.set_attribute("messaging.batch.message_count", len(results))
    for result in results:
        if result.outcome in _REPEATS and result.trace_context is not None:
            span.add_link(span_context_of(result.trace_context), {"inboxd.link": "first_delivery"})


def handed_out(events: Iterable[ClaimedEvent], by: Span) -> None:
    """A `receive` span per claimed event with a stored context: in the delivery's trace, linked to `by`.

    `by` is the Claim's span or the Work stream's; it gets the batch's size.
    """
    assert tracing.TRACER is not None
    link = (Link(by.get_span_context()),) if by.get_span_context().is_valid else ()
    count = 0
    for event in events:
        count += 1
        if event.trace_context is None:
            continue
        attributes = event_attributes(event.namespace, event.event_key)
        attributes.update(
            {
                "messaging.operation.type": "receive",
                "messaging.operation.name": "receive",
                "inboxd.attempt": event.attempt,
                "inboxd.replayed": event.replayed,
                "inboxd.fencing_token": event.fencing_token,
            }
        )
        tracing.TRACER.start_span(
            "receive", context=parent_of(event.trace_context), kind=SpanKind.CONSUMER, attributes=attributes, links=link
        ).end()
    if by.is_recording():
        by.set_attribute("messaging.batch.message_count", count)


def claim_attributes() -> dict[str, Any]:
    return {
        "messaging.system": MESSAGING_SYSTEM,
        "messaging.operation.type": "receive",
        "messaging.operation.name": "claim",
    }


def start_group_span(operation: str, callers: Sequence[Span], size: int) -> Span:
    """One span for a group commit's flush: a child of its first caller's span, linked to every other caller's.

    Each caller's span links back to it: one span per group, never one per caller.
    """
    assert tracing.TRACER is not None
    parent = trace.set_span_in_context(callers[0], Context()) if callers else Context()
    links = [Link(c.get_span_context()) for c in callers[1:] if c.get_span_context().is_valid]
    span = tracing.TRACER.start_span(
        operation,
        context=parent,
        kind=SpanKind.CLIENT,
        attributes={
            "db.system.name": "postgresql",
            "db.operation.name": operation,
            "db.collection.name": "inbox_events",
            "inboxd.group.size": size,
        },
        links=links,
    )
    for caller in callers:
        if caller.is_recording():
            caller.add_link(span.get_span_context(), {"inboxd.link": "group_commit"})
    return span
