"""A SERVER span around each admitted call, and one per stream item: `api.handlers` adds them only when tracing is on.

When tracing is off `api.handlers` builds exactly the handlers it always
did: nothing here runs, not even a check per call.

A unary call's span is current while its method runs, so what it starts
(a group commit's flush, a Claim's hand-out spans, log lines) finds it. A
stream's span is made current in the call's own task and never detached:
grpc runs each call in a task of its own (as `api.identity` relies on),
and an async generator may be closed from another context, where detaching
would fail.
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import AsyncGenerator, AsyncIterable, Callable
from typing import Any

import grpc
from google.protobuf import message
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Span

from inboxd.api.admission import Handle, ObserveRpc
from inboxd.config.tokens import Caller
from inboxd.domain.trace_context import TraceContext, trace_context_from_headers
from inboxd.observability import spans

Context = grpc.aio.ServicerContext[Any, Any]
StreamHandle = Callable[[Caller, AsyncIterable[Any], Context], AsyncGenerator[message.Message, None]]


def observing_spans(observe: ObserveRpc) -> ObserveRpc:
    """`observe`, and the call's code on its span (current where `api.handlers` reports how a call ended)."""

    def observe_and_mark(method: str, code: grpc.StatusCode, seconds: float) -> None:
        observe(method, code, seconds)
        spans.set_rpc_code(spans.current_span(), code.value[0], code.name)

    return observe_and_mark


def _call_trace(context: Context) -> TraceContext | None:
    return trace_context_from_headers(context.invocation_metadata())


def traced_unary(path: str, handle: Handle) -> Handle:
    """`handle` inside a span named by the full method, a child of the call's metadata context."""
    name = path.lstrip("/")
    method = name.rpartition("/")[2]
    base = spans.rpc_attributes(path)
    if method == "Claim":
        base.update(spans.claim_attributes())

    async def traced(caller: Caller, request: Any, context: Context) -> message.Message:
        attributes = spans.about_request(dict(base), method, request) if method in spans.EVENT_OPERATIONS else base
        span = spans.start_server_span(name, spans.parent_of(_call_trace(context)), attributes)
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            response: message.Message = await handle(caller, request, context)
            return response
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            record_unexpected(span, exc)
            raise
        finally:
            otel_context.detach(token)
            span.end()

    return traced


def record_unexpected(span: Span, exc: BaseException) -> None:
    """An unexpected exception on `span`: its type and frames, never its text.

    A database error's text runs on with PostgreSQL's DETAIL line, which names
    the row (`Key (namespace, event_key)=(shop, alice@example.com)`): keys must
    not leave in a span any more than in a log line. The server's log has it.
    """
    frames = "".join(traceback.format_tb(exc.__traceback__))
    withheld = f"{type(exc).__name__} (its text is withheld from traces: it may carry event keys)"
    span.record_exception(
        exc, attributes={"exception.message": withheld, "exception.stacktrace": f"{frames}{type(exc).__name__}"}
    )


def traced_stream(path: str, handle: StreamHandle) -> StreamHandle:
    """A stream's own span, current for everything the stream starts; its items' spans link to it."""
    name = path.lstrip("/")
    base = spans.rpc_attributes(path)

    async def traced(
        caller: Caller, requests: AsyncIterable[Any], context: Context
    ) -> AsyncGenerator[message.Message, None]:
        span = spans.start_server_span(name, spans.parent_of(_call_trace(context)), base)
        otel_context.attach(trace.set_span_in_context(span))  # never detached: see the module's docstring
        try:
            # Closed with this one, in this task: the inner handler's own ending (its code, its metric) runs now.
            async with contextlib.aclosing(handle(caller, requests, context)) as answers:
                async for answer in answers:
                    yield answer
        finally:
            span.end()

    return traced


def start_item_span(
    stream: Span,
    stream_method: str,
    method: str,
    parent: TraceContext | None,
    *,
    sequence: int,
    attributes: dict[str, Any],
) -> Span:
    """A stream item's span, named as the unary call it stands for (`.../Accept`, `.../Complete`), linked to the stream.

    `inboxd.stream` names the stream (AcceptStream, Work), `inboxd.stream.sequence` the item's sequence on it.
    """
    attributes.update(spans.rpc_attributes(f"/inboxd.v1.InboxService/{method}"))
    attributes["inboxd.stream"] = stream_method
    attributes["inboxd.stream.sequence"] = sequence
    links = (Link(stream.get_span_context()),) if stream.get_span_context().is_valid else ()
    return spans.start_server_span(f"inboxd.v1.InboxService/{method}", spans.parent_of(parent), attributes, links)


def work_call_trace(request: Any, stream_trace: TraceContext | None) -> TraceContext | None:
    """A Work call message's context: its own `trace_context` (ignored when malformed), else the stream's metadata."""
    if not request.HasField("trace_context"):
        return stream_trace
    field = request.trace_context
    own = trace_context_from_headers((("traceparent", field.traceparent), ("tracestate", field.tracestate)))
    return own or stream_trace
