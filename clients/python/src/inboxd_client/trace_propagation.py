"""The caller's trace context on every call: W3C `traceparent`/`tracestate`, by OpenTelemetry's own propagator.

A unary call carries it as metadata; a Work stream's call message and an
AcceptStream item carry it in their `trace_context` field, since a stream's
metadata is sent once and its messages come from many callers. Only when a
valid span is current: without OpenTelemetry installed, or with no span, a
call costs one `get_current_span()` and a validity check, nothing more. Never
the global `OTEL_PROPAGATORS`: the contract stores exactly these two headers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from inboxd_client.v1 import types_pb2

if TYPE_CHECKING:
    from opentelemetry.trace import Span
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    from inboxd_client.connection import Metadata

# Set on first use: OpenTelemetry is imported only when the client first makes a call.
_loaded = False
_current_span: Callable[[], Span] | None = None
_propagator: TraceContextTextMapPropagator | None = None


def _load() -> None:
    global _loaded, _current_span, _propagator  # noqa: PLW0603 - loaded once, read by every call
    _loaded = True
    try:
        from opentelemetry.trace import get_current_span
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    except ImportError:
        return  # no OpenTelemetry: nothing to propagate, ever
    _propagator = TraceContextTextMapPropagator()
    _current_span = get_current_span


def span_is_current() -> bool:
    """Whether a valid span is current: a context worth carrying to a call made later, elsewhere."""
    if not _loaded:
        _load()
    return _current_span is not None and _current_span().get_span_context().is_valid


def current_headers() -> dict[str, str] | None:
    """`traceparent` (and `tracestate`) of the current span, or None when no valid span is current."""
    if not _loaded:
        _load()
    if _current_span is None or not _current_span().get_span_context().is_valid:
        return None
    assert _propagator is not None
    carrier: dict[str, str] = {}
    _propagator.inject(carrier)
    return carrier


def with_trace_metadata(metadata: Metadata) -> Metadata:
    """The call's metadata, plus the current span's context when one is valid."""
    headers = current_headers()
    if headers is None:
        return metadata
    return (*metadata, *headers.items())


def fill_trace_context(message: Any) -> None:
    """Sets `message.trace_context` (a WorkRequest's, an AcceptRequest's) to the current span's, unless it has one."""
    if message.HasField("trace_context"):
        return  # the caller's own (an edge forwarding its provider's context): kept as given
    headers = current_headers()
    if headers is not None:
        message.trace_context.CopyFrom(
            types_pb2.TraceContext(traceparent=headers.get("traceparent", ""), tracestate=headers.get("tracestate", ""))
        )
