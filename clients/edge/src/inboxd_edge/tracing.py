"""The edge's tracing: whether it exports (the OTEL_* variables), its provider, and one SERVER span per delivery.

The edge is where a delivery's trace starts, or where it continues one the
provider sent in `traceparent`: the request's span is a child of that, else a
new root, and its context goes on the Accept (`AcceptRequest.trace_context`),
which inboxd stores with the event and hands back on every claim, so the
worker's span joins the same trace (docs/operations.md, Tracing).

Export is on only when the standard variables ask for an exporter (the rule
every inboxd process follows, in `exporters_named`); off, there is no SDK
object at all and no span: the edge then still forwards the provider's own
context, since propagation is data, not SDK work. Everything else (sampler,
resource, batching, the exporter's endpoint and headers) is the SDK's own
reading of the process's OTEL_* variables.

A span never carries the body, the event key (only its short hash, as
inboxd's logs name it), a header, a signature or a secret.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

import inboxd_edge
from inboxd_client.v1 import types_pb2
from inboxd_edge.config import ConfigError

if TYPE_CHECKING:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

    from inboxd_edge.keys import ResolvedEvent

SERVICE_NAME = "inboxd-edge"
EXPORTERS = frozenset({"otlp", "console"})
# inboxd refuses an AcceptRequest.trace_context whose tracestate passes 512 bytes (W3C lets a receiver cut it
# there), while OpenTelemetry carries up to 8192: a longer one is dropped here, as W3C allows, rather than
# make inboxd refuse the delivery over a header the provider chose.
MAX_TRACESTATE_BYTES = 512
# W3C Trace Context only, never the global OTEL_PROPAGATORS: inboxd stores exactly these two headers.
_PROPAGATOR = TraceContextTextMapPropagator()


def exporters_named(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The exporters the OTEL_* variables ask for, () when tracing is off; ConfigError for one the edge lacks.

    On only when OTEL_TRACES_EXPORTER names an exporter other than `none`, or, when it is unset, when an OTLP
    endpoint is set; OTEL_SDK_DISABLED=true is always off. An empty variable counts as unset, as the
    OpenTelemetry specification asks.
    """
    if _value(environ, "OTEL_SDK_DISABLED").lower() == "true":
        return ()
    named = _value(environ, "OTEL_TRACES_EXPORTER")
    if not named:
        endpoints = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
        return ("otlp",) if any(_value(environ, name) for name in endpoints) else ()
    names = [name.strip().lower() for name in named.split(",") if name.strip()]
    for name in names:
        if name not in EXPORTERS and name != "none":
            raise ConfigError(
                f"OTEL_TRACES_EXPORTER: unknown exporter {name!r}; the edge exports with otlp or console (or none)"
            )
    return tuple(dict.fromkeys(name for name in names if name != "none"))


def _value(environ: Mapping[str, str], name: str) -> str:
    return environ.get(name, "").strip()


@dataclass(frozen=True)
class EdgeTracing:
    """The tracer the request spans come from; `owned` is the provider the edge made (flushed and shut at stop)."""

    tracer: trace.Tracer
    owned: SdkTracerProvider | None = None

    async def stop(self) -> None:
        """Exports what is still batched and stops the exporter (only a provider the edge made itself)."""
        if self.owned is not None:
            # The SDK's shutdown blocks while it exports the last batch: off the event loop.
            await asyncio.to_thread(self.owned.shutdown)


def tracing_with(provider: trace.TracerProvider) -> EdgeTracing:
    """Tracing through the application's own provider, which the application flushes and shuts down."""
    return EdgeTracing(provider.get_tracer("inboxd_edge", inboxd_edge.__version__))


def start_tracing(environ: Mapping[str, str]) -> EdgeTracing | None:
    """The SDK's provider with the exporters `environ` names (batched), or None when tracing is off.

    Raises ConfigError for an exporter or an OTLP protocol the edge cannot export with, before anything starts.
    """
    names = exporters_named(environ)
    if not names:
        return None
    exporters = [_exporter(name, environ) for name in names]
    # Imported only when on: an edge with tracing off loads no SDK.
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=_resource())
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return EdgeTracing(provider.get_tracer("inboxd_edge", inboxd_edge.__version__), owned=provider)


def _exporter(name: str, environ: Mapping[str, str]) -> SpanExporter:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    variable = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
    if not _value(environ, variable):
        variable = "OTEL_EXPORTER_OTLP_PROTOCOL"
    protocol = _value(environ, variable) or "grpc"
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GrpcExporter()
    if protocol == "http/protobuf":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[import-not-found,unused-ignore]
                OTLPSpanExporter as HttpExporter,
            )
        except ImportError:
            raise ConfigError(
                f"{variable}=http/protobuf needs the opentelemetry-exporter-otlp-proto-http package, which is not"
                " installed: install it, or export over grpc (the default)"
            ) from None
        exporter: SpanExporter = HttpExporter()
        return exporter
    raise ConfigError(f"{variable}: unknown protocol {protocol!r}; the edge exports OTLP over grpc or http/protobuf")


def _resource() -> Resource:
    """The SDK's resource from OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; `inboxd-edge` when neither names one."""
    from opentelemetry.sdk.resources import SERVICE_NAME as SERVICE_NAME_KEY
    from opentelemetry.sdk.resources import OTELResourceDetector
    from opentelemetry.sdk.resources import Resource as SdkResource

    named = SERVICE_NAME_KEY in OTELResourceDetector().detect().attributes
    return SdkResource.create({} if named else {SERVICE_NAME_KEY: SERVICE_NAME})


def forwarded_context(headers: Mapping[str, str]) -> types_pb2.TraceContext | None:
    """The provider's own trace context, for an edge that traces nothing: forwarded if valid, else None."""
    if "traceparent" not in headers:
        return None
    return _trace_context_of(_PROPAGATOR.extract(headers))


def _trace_context_of(context: Context) -> types_pb2.TraceContext | None:
    """The W3C headers of `context`'s span, as the Accept carries them (None for no valid span)."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, context)
    traceparent = carrier.get("traceparent")
    if traceparent is None:
        return None
    tracestate = carrier.get("tracestate", "")
    if len(tracestate.encode()) > MAX_TRACESTATE_BYTES:
        tracestate = ""
    return types_pb2.TraceContext(traceparent=traceparent, tracestate=tracestate)


def event_ref(namespace: str, event_key: str) -> str:
    """The event's reference, as inboxd's logs and spans name it: 12 hex digits of sha256(namespace NUL key)."""
    return hashlib.sha256(namespace.encode("utf-8") + b"\0" + event_key.encode("utf-8")).hexdigest()[:12]


class RequestSpan:
    """One delivery's SERVER span: what the Accept carries, and what the request came to."""

    def __init__(self, span: trace.Span) -> None:
        self.span = span
        self.trace_context = _trace_context_of(trace.set_span_in_context(span))

    @property
    def log_fields(self) -> dict[str, str]:
        """`trace_id` and `span_id` for the request's log line, when the span is recorded."""
        if not self.span.is_recording():
            return {}
        context = self.span.get_span_context()
        return {"trace_id": trace.format_trace_id(context.trace_id), "span_id": trace.format_span_id(context.span_id)}

    def answered(self, status: int, outcome: str, event: ResolvedEvent | None) -> None:
        """Records the answer (a 5xx is the span's error) and, once the event is named, which event it was."""
        span = self.span
        if not span.is_recording():
            return
        span.set_attribute("http.response.status_code", status)
        span.set_attribute("inboxd.accept.outcome", outcome)
        if event is not None:
            span.set_attribute("messaging.system", "inboxd")
            span.set_attribute("messaging.destination.name", event.namespace)
            span.set_attribute("messaging.message.id", event_ref(event.namespace, event.event_key))
        if status >= 500:
            # HTTP semantic conventions: a server span is an error on 5xx only (a 4xx is the client's).
            span.set_attribute("error.type", str(status))
            span.set_status(Status(StatusCode.ERROR, outcome))


@contextmanager
def request_span(tracer: trace.Tracer, route_path: str, request: web.Request) -> Iterator[RequestSpan]:
    """The request's SERVER span, current while it runs: a child of the provider's traceparent, else a root."""
    parent = _PROPAGATOR.extract(request.headers) if "traceparent" in request.headers else None
    attributes = {
        "http.request.method": request.method,
        "http.route": route_path,
        # The path as sent, without its query string (which may carry what a provider signs with).
        "url.path": request.rel_url.raw_path,
        "url.scheme": request.scheme,
    }
    with tracer.start_as_current_span(
        f"{request.method} {route_path}", context=parent, kind=SpanKind.SERVER, attributes=attributes
    ) as span:
        try:
            yield RequestSpan(span)
        except Exception as exc:
            # aiohttp answers an unhandled exception 500; the span says so (the SDK records the exception).
            span.set_attribute("http.response.status_code", 500)
            span.set_attribute("error.type", type(exc).__qualname__)
            raise
