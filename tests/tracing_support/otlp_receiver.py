"""A real OTLP/gRPC trace receiver for tests: the collector's TraceService, served from opentelemetry-proto.

    async with otlp_receiver() as receiver:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.endpoint  # and OTEL_EXPORTER_OTLP_INSECURE=true
        ...
        spans = await receiver.spans(3, timeout=10)

Each exported span comes back decoded (`ReceivedSpan`): ids as lowercase hex
(`parent_span_id` "" for a root), the kind's name (`SERVER`, `CONSUMER`...),
attributes as a dict of plain values, links, the status, and the resource's
`service.name`. The exporters under test are the real SDKs' (Python's,
Node's), speaking the real protocol to a real grpc server on a real port.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1 import trace_pb2


@dataclass(frozen=True)
class ReceivedLink:
    trace_id: str
    span_id: str
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as the exporter sent it."""

    trace_id: str
    span_id: str
    # "" for a root span.
    parent_span_id: str
    name: str
    # The OTLP kind without its prefix: INTERNAL, SERVER, CLIENT, PRODUCER, CONSUMER (UNSPECIFIED if unset).
    kind: str
    attributes: dict[str, Any]
    links: tuple[ReceivedLink, ...]
    service_name: str
    # UNSET, OK or ERROR, and the status's message.
    status_code: str = "UNSET"
    status_message: str = ""
    resource: dict[str, Any] = field(default_factory=dict)
    scope: str = ""
    # The span's events by name (an exception recorded: "exception").
    events: tuple[str, ...] = ()
    start_unix_nano: int = 0
    end_unix_nano: int = 0

    @property
    def is_root(self) -> bool:
        return not self.parent_span_id

    def links_to(self, trace_id: str, span_id: str | None = None) -> bool:
        """Whether one of its links names that trace (and that span, when given)."""
        return any(link.trace_id == trace_id and span_id in (None, link.span_id) for link in self.links)


def decode_value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [decode_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return decode_attributes(value.kvlist_value.values)
    return getattr(value, kind)


def decode_attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: decode_value(pair.value) for pair in pairs if isinstance(pair, KeyValue)}


def decode_request(request: trace_service_pb2.ExportTraceServiceRequest) -> list[ReceivedSpan]:
    """Every span of one Export request, each with its resource's attributes."""
    decoded = []
    for resource_spans in request.resource_spans:
        resource = decode_attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                decoded.append(
                    ReceivedSpan(
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        name=span.name,
                        kind=trace_pb2.Span.SpanKind.Name(span.kind).removeprefix("SPAN_KIND_"),
                        attributes=decode_attributes(span.attributes),
                        links=tuple(
                            ReceivedLink(link.trace_id.hex(), link.span_id.hex(), decode_attributes(link.attributes))
                            for link in span.links
                        ),
                        service_name=str(resource.get("service.name", "")),
                        status_code=trace_pb2.Status.StatusCode.Name(span.status.code).removeprefix("STATUS_CODE_"),
                        status_message=span.status.message,
                        resource=resource,
                        scope=scope_spans.scope.name,
                        events=tuple(event.name for event in span.events),
                        start_unix_nano=span.start_time_unix_nano,
                        end_unix_nano=span.end_time_unix_nano,
                    )
                )
    return decoded


class OtlpReceiver(trace_service_pb2_grpc.TraceServiceServicer):
    """Keeps every span exported to it, in arrival order."""

    def __init__(self) -> None:
        self.endpoint = ""
        self.received: list[ReceivedSpan] = []
        self.requests = 0
        self._arrived = asyncio.Condition()

    async def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        spans = decode_request(request)
        async with self._arrived:
            self.requests += 1
            self.received.extend(spans)
            self._arrived.notify_all()
        return trace_service_pb2.ExportTraceServiceResponse()

    async def spans(self, min_count: int = 1, timeout: float = 10.0) -> list[ReceivedSpan]:  # noqa: ASYNC109 - the API
        """Every span received so far, once there are at least `min_count`; AssertionError after `timeout` s."""
        return await self.wait_for(lambda spans: len(spans) >= min_count, timeout, f"{min_count} spans")

    async def wait_for(
        self,
        ready: Callable[[list[ReceivedSpan]], bool],
        timeout: float = 10.0,  # noqa: ASYNC109 - as spans(): the tests' one API
        what: str = "the spans asked for",
    ) -> list[ReceivedSpan]:
        """Every span received so far, once `ready` says they hold what the test waits for (woken per Export)."""
        async with self._arrived:
            try:
                await asyncio.wait_for(self._arrived.wait_for(lambda: ready(self.received)), timeout)
            except TimeoutError:
                names = sorted({s.name for s in self.received})
                raise AssertionError(f"waited {timeout} s for {what}; received {len(self.received)}: {names}") from None
            return list(self.received)

    def clear(self) -> None:
        self.received.clear()


@contextlib.asynccontextmanager
async def otlp_receiver(host: str = "127.0.0.1") -> AsyncIterator[OtlpReceiver]:
    """A receiver on a free port of `host`, stopped on leaving (its spans stay readable)."""
    receiver = OtlpReceiver()
    server = grpc.aio.server()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(receiver, server)
    port = server.add_insecure_port(f"{host}:0")
    await server.start()
    receiver.endpoint = f"http://{host}:{port}"
    try:
        yield receiver
    finally:
        await server.stop(None)
