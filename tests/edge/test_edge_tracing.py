"""The edge starts each delivery's trace (or continues the provider's) and inboxd stores what the edge sent.

Real parts throughout: an edge in this process in front of the session's
inboxd, the OpenTelemetry SDK with its in-memory exporter as the edge's
provider, and the event claimed back from inboxd to compare its stored
`trace_context` with the span the edge made. Each traced test runs on the
stream path (AcceptStream items) and on the unary path.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import logging
import os
import secrets
import signal
import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from google.protobuf.duration_pb2 import Duration
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, SpanKind, StatusCode, format_span_id, format_trace_id

from inboxd.serving.server import RunningServer
from inboxd_client.v1 import inbox_pb2, inbox_pb2_grpc
from inboxd_edge.config import ConfigError, config_from_data
from inboxd_edge.serve import RunningEdge, start_edge
from inboxd_edge.tracing import exporters_named, start_tracing
from tests.edge.rig import (
    STD_ACCOUNTS,
    STRIPE_NEW_SECRET,
    Reply,
    as_body,
    post,
    routes_config,
    sign_standard,
    sign_stripe,
    std_account,
)
from tests.edge.test_edge_cli import ROUTES_TOML

STD_ROUTE = "/hooks/std/{account}"


@pytest.fixture(scope="module")
def exporter() -> Iterator[InMemorySpanExporter]:
    spans = InMemorySpanExporter()
    yield spans
    spans.shutdown()


@pytest.fixture(scope="module")
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    """The application's provider, as an embedding application would hand it to the edge (never the global one)."""
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield tracer_provider
    tracer_provider.shutdown()


@pytest.fixture(scope="module", params=["stream", "unary"])
async def traced_edge(request: pytest.FixtureRequest, server: RunningServer, provider: TracerProvider) -> Any:
    """An edge tracing through `provider`: one forwarding over AcceptStreams, one with unary Accept only."""
    mode = request.param
    config = config_from_data(routes_config(f"127.0.0.1:{server.port}", accept_mode=mode), {})
    running = await start_edge(config, listen="127.0.0.1:0", environ={}, tracer_provider=provider)
    assert running.forwarder.streaming == (mode == "stream")
    yield running
    await running.stop()


@pytest.fixture(scope="module", params=["stream", "unary"])
async def untraced_edge(request: pytest.FixtureRequest, server: RunningServer) -> AsyncIterator[RunningEdge]:
    """An edge whose OTEL_* variables ask for no exporter (tracing off), on either path."""
    config = config_from_data(routes_config(f"127.0.0.1:{server.port}", accept_mode=request.param), {})
    running = await start_edge(config, listen="127.0.0.1:0", environ={"OTEL_TRACES_EXPORTER": "none"})
    yield running
    await running.stop()


def provider_traceparent() -> tuple[str, str, str]:
    """(traceparent, trace id, span id) of a provider's own sampled span."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


async def deliver(
    http: aiohttp.ClientSession, edge: RunningEdge, acct: str, msg_id: str, extra: Mapping[str, str] = {}
) -> tuple[Reply, bytes, dict[str, str]]:
    """One signed Standard Webhooks delivery on `acct`'s path, with `extra` headers; its reply, body and headers."""
    body = as_body({"type": "invoice.paid", "id": msg_id, "amount": 1200})
    headers = {**sign_standard(body, msg_id, account=acct), **extra}
    return await post(http, f"{edge.url}/hooks/std/{acct}", body, headers), body, headers


def the_span_of(exporter: InMemorySpanExporter, acct: str) -> ReadableSpan:
    """The one request span whose path names `acct`."""
    spans = [s for s in exporter.get_finished_spans() if (s.attributes or {}).get("url.path") == f"/hooks/std/{acct}"]
    assert len(spans) == 1, spans
    return spans[0]


def context_of(span: ReadableSpan) -> SpanContext:
    context = span.get_span_context()
    assert context is not None
    return context


def traceparent_of(span: ReadableSpan) -> str:
    """The W3C traceparent of `span`, written out from its ids and flags (the SDK's random-trace-id flag included)."""
    context = context_of(span)
    return f"00-{format_trace_id(context.trace_id)}-{format_span_id(context.span_id)}-{context.trace_flags:02x}"


async def claimed(inbox: inbox_pb2_grpc.InboxServiceStub, acct: str) -> inbox_pb2.ClaimedEvent:
    answer = await inbox.Claim(inbox_pb2.ClaimRequest(namespaces=[f"std/{acct}"], lease=Duration(seconds=600)))
    [event] = answer.events
    assert isinstance(event, inbox_pb2.ClaimedEvent)
    return event


async def test_a_delivery_is_one_server_span_whose_context_is_what_inboxd_stores_and_hands_back(
    traced_edge: RunningEdge,
    http: aiohttp.ClientSession,
    exporter: InMemorySpanExporter,
    inbox: inbox_pb2_grpc.InboxServiceStub,
) -> None:
    acct = std_account()
    reply, _, _ = await deliver(http, traced_edge, acct, "msg_root")
    assert (reply.status, reply.outcome) == (200, "accepted")
    span = the_span_of(exporter, acct)
    assert (span.name, span.kind, span.parent) == (f"POST {STD_ROUTE}", SpanKind.SERVER, None)
    assert span.status.status_code is StatusCode.UNSET
    # inboxd logs' reference for (namespace, key): 12 hex digits of sha256(namespace NUL key), computed here anew.
    ref = hashlib.sha256(f"std/{acct}\0msg_root".encode()).hexdigest()[:12]
    assert dict(span.attributes or {}) == {
        "http.request.method": "POST",
        "http.route": STD_ROUTE,
        "url.path": f"/hooks/std/{acct}",
        "url.scheme": "http",
        "http.response.status_code": 200,
        "inboxd.accept.outcome": "accepted",
        "messaging.system": "inboxd",
        "messaging.destination.name": f"std/{acct}",
        "messaging.message.id": ref,
    }
    event = await claimed(inbox, acct)
    assert (event.trace_context.traceparent, event.trace_context.tracestate) == (traceparent_of(span), "")


async def test_a_providers_traceparent_is_continued_and_its_tracestate_carried_to_inboxd(
    traced_edge: RunningEdge,
    http: aiohttp.ClientSession,
    exporter: InMemorySpanExporter,
    inbox: inbox_pb2_grpc.InboxServiceStub,
) -> None:
    acct = std_account()
    traceparent, trace_id, provider_span = provider_traceparent()
    trace = {"traceparent": traceparent, "tracestate": "vendor=abc,other=1"}
    reply, _, _ = await deliver(http, traced_edge, acct, "msg_child", trace)
    assert (reply.status, reply.outcome) == (200, "accepted")
    span = the_span_of(exporter, acct)
    context = context_of(span)
    assert format_trace_id(context.trace_id) == trace_id
    assert span.parent is not None and span.parent.is_remote
    assert format_span_id(span.parent.span_id) == provider_span
    event = await claimed(inbox, acct)
    assert event.trace_context.traceparent == traceparent_of(span)
    assert event.trace_context.traceparent.startswith(f"00-{trace_id}-")
    assert event.trace_context.tracestate == "vendor=abc,other=1"


async def test_the_requests_log_line_names_its_trace_and_span(
    traced_edge: RunningEdge,
    http: aiohttp.ClientSession,
    exporter: InMemorySpanExporter,
    caplog: pytest.LogCaptureFixture,
) -> None:
    acct = std_account()
    with caplog.at_level(logging.INFO, logger="inboxd_edge"):
        reply, _, _ = await deliver(http, traced_edge, acct, "msg_logged")
    assert reply.status == 200
    context = context_of(the_span_of(exporter, acct))
    [line] = [r.getMessage() for r in caplog.records if r.name == "inboxd_edge" and 'status="200"' in r.getMessage()]
    assert f'trace_id="{format_trace_id(context.trace_id)}" span_id="{format_span_id(context.span_id)}"' in line


async def test_a_redelivery_keeps_the_first_deliverys_trace_and_its_span_says_duplicate(
    traced_edge: RunningEdge,
    http: aiohttp.ClientSession,
    exporter: InMemorySpanExporter,
    inbox: inbox_pb2_grpc.InboxServiceStub,
) -> None:
    acct = std_account()
    first, _, _ = await deliver(http, traced_edge, acct, "msg_again", {"traceparent": provider_traceparent()[0]})
    again, _, _ = await deliver(http, traced_edge, acct, "msg_again", {"traceparent": provider_traceparent()[0]})
    assert (first.outcome, again.outcome) == ("accepted", "duplicate")
    spans = [s for s in exporter.get_finished_spans() if (s.attributes or {}).get("url.path") == f"/hooks/std/{acct}"]
    assert [(s.attributes or {})["inboxd.accept.outcome"] for s in spans] == ["accepted", "duplicate"]
    original = context_of(spans[0])
    event = await claimed(inbox, acct)
    assert event.trace_context.traceparent.split("-")[1:3] == [
        format_trace_id(original.trace_id),
        format_span_id(original.span_id),
    ]


async def test_nothing_the_provider_signs_nor_the_body_nor_the_raw_key_is_a_span_attribute(
    traced_edge: RunningEdge, http: aiohttp.ClientSession, exporter: InMemorySpanExporter
) -> None:
    acct = std_account()
    msg_id = f"msg_secret_{secrets.token_hex(4)}"
    reply, body, headers = await deliver(http, traced_edge, acct, msg_id)
    assert reply.status == 200
    span = the_span_of(exporter, acct)
    said = [span.name, *map(str, (span.attributes or {}).keys()), *map(str, (span.attributes or {}).values())]
    for secret in (msg_id, body.decode(), *headers.values(), STD_ACCOUNTS[acct], "1200"):
        assert not any(secret in text for text in said), secret
    assert not any("signature" in key or "header" in key for key in (span.attributes or {}))


async def test_a_refused_signature_is_a_span_without_the_event_and_not_an_error(
    traced_edge: RunningEdge, http: aiohttp.ClientSession, exporter: InMemorySpanExporter
) -> None:
    acct = std_account()
    body = as_body({"type": "invoice.paid", "id": "msg_forged"})
    headers = sign_standard(body, "msg_forged", secret="whsec_" + "QUJD" * 8)
    reply = await post(http, f"{traced_edge.url}/hooks/std/{acct}", body, headers)
    assert (reply.status, reply.outcome) == (401, "unauthenticated")
    span = the_span_of(exporter, acct)
    attributes = dict(span.attributes or {})
    assert (attributes["http.response.status_code"], attributes["inboxd.accept.outcome"]) == (401, "unauthenticated")
    assert "messaging.destination.name" not in attributes
    # A 4xx is the client's mistake: the server span's status stays unset (HTTP semantic conventions).
    assert span.status.status_code is StatusCode.UNSET


async def test_an_unreachable_inboxd_is_a_503_and_an_error_span(
    http: aiohttp.ClientSession, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    # Port 1 on loopback refuses every connection: inboxd cannot be reached, the provider must retry.
    config = config_from_data(routes_config("127.0.0.1:1", deadline=2.0, accept_mode="unary"), {})
    edge = await start_edge(config, listen="127.0.0.1:0", environ={}, tracer_provider=provider)
    try:
        acct = std_account()
        reply, _, _ = await deliver(http, edge, acct, "msg_down")
    finally:
        await edge.stop()
    assert (reply.status, reply.outcome) == (503, "unavailable")
    span = the_span_of(exporter, acct)
    assert span.status.status_code is StatusCode.ERROR
    assert (span.attributes or {})["error.type"] == "503"


async def test_a_tracestate_longer_than_inboxd_keeps_is_dropped_and_the_delivery_still_accepted(
    traced_edge: RunningEdge, http: aiohttp.ClientSession, inbox: inbox_pb2_grpc.InboxServiceStub
) -> None:
    acct = std_account()
    traceparent, trace_id, _ = provider_traceparent()
    long_state = ",".join(f"v{i}=" + "x" * 40 for i in range(20))
    assert len(long_state) > 512
    reply, _, _ = await deliver(
        http, traced_edge, acct, "msg_long", {"traceparent": traceparent, "tracestate": long_state}
    )
    assert (reply.status, reply.outcome) == (200, "accepted")
    event = await claimed(inbox, acct)
    assert event.trace_context.traceparent.split("-")[1] == trace_id
    assert event.trace_context.tracestate == ""


async def test_with_tracing_off_the_providers_context_is_forwarded_as_it_came_and_no_span_is_made(
    untraced_edge: RunningEdge, http: aiohttp.ClientSession, inbox: inbox_pb2_grpc.InboxServiceStub
) -> None:
    assert untraced_edge.tracing is None
    acct = std_account()
    traceparent, _, _ = provider_traceparent()
    reply, _, _ = await deliver(http, untraced_edge, acct, "msg_off", {"traceparent": traceparent, "tracestate": "v=1"})
    assert (reply.status, reply.outcome) == (200, "accepted")
    event = await claimed(inbox, acct)
    # The provider's own span id, not a child's: the edge put no span between the provider and inboxd.
    assert (event.trace_context.traceparent, event.trace_context.tracestate) == (traceparent, "v=1")


@pytest.mark.parametrize(
    "traceparent",
    [
        "00-" + "0" * 32 + "-" + "1" * 16 + "-01",  # a zero trace id
        "00-" + "A" * 32 + "-" + "1" * 16 + "-01",  # uppercase hex
        "00-" + "a" * 32 + "-" + "1" * 16 + "-01-extra",  # version 00 with a fifth field
        "not a traceparent",
    ],
)
async def test_with_tracing_off_a_malformed_traceparent_is_not_forwarded_and_the_delivery_still_accepted(
    untraced_edge: RunningEdge, http: aiohttp.ClientSession, inbox: inbox_pb2_grpc.InboxServiceStub, traceparent: str
) -> None:
    acct = std_account()
    reply, _, _ = await deliver(http, untraced_edge, acct, "msg_bad", {"traceparent": traceparent})
    assert (reply.status, reply.outcome) == (200, "accepted")
    event = await claimed(inbox, acct)
    assert not event.HasField("trace_context") or event.trace_context.traceparent == ""


@pytest.mark.parametrize(
    ("environ", "exporters"),
    [
        ({}, ()),
        ({"OTEL_TRACES_EXPORTER": "none"}, ()),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, ()),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, ("otlp",)),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4317"}, ("otlp",)),
        ({"OTEL_TRACES_EXPORTER": "", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, ("otlp",)),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": ""}, ()),
        ({"OTEL_TRACES_EXPORTER": "console"}, ("console",)),
        ({"OTEL_TRACES_EXPORTER": "OTLP, console"}, ("otlp", "console")),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, ()),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_SDK_DISABLED": "TRUE"}, ()),
        ({"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "false"}, ("console",)),
    ],
)
def test_export_is_on_only_when_the_otel_variables_name_an_exporter(
    environ: dict[str, str], exporters: tuple[str, ...]
) -> None:
    assert exporters_named(environ) == exporters


@pytest.mark.parametrize("named", ["zipkin", "otlp,jaeger"])
def test_an_unknown_exporter_is_refused_naming_the_variable(named: str) -> None:
    with pytest.raises(ConfigError, match=r"^OTEL_TRACES_EXPORTER: unknown exporter"):
        exporters_named({"OTEL_TRACES_EXPORTER": named})


def test_an_otlp_protocol_the_edge_cannot_export_with_is_refused_naming_the_variable() -> None:
    with pytest.raises(ConfigError, match=r"^OTEL_EXPORTER_OTLP_PROTOCOL: unknown protocol 'http/json'"):
        start_tracing({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})
    environ = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}
    if importlib.util.find_spec("opentelemetry.exporter.otlp.proto.http") is None:
        with pytest.raises(ConfigError, match=r"^OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf needs"):
            start_tracing(environ)
    else:
        tracing = start_tracing(environ)
        assert tracing is not None and tracing.owned is not None
        tracing.owned.shutdown()


async def test_the_edge_refuses_to_start_with_an_unknown_exporter(server: RunningServer) -> None:
    config = config_from_data(routes_config(f"127.0.0.1:{server.port}"), {})
    with pytest.raises(ConfigError, match="OTEL_TRACES_EXPORTER"):
        await start_edge(config, listen="127.0.0.1:0", environ={"OTEL_TRACES_EXPORTER": "jaeger"})


async def test_the_command_refuses_an_unknown_exporter_in_one_line_and_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "edge.toml"
    config.write_text(ROUTES_TOML.format(target="127.0.0.1:1"))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "inboxd_edge",
        "--config",
        str(config),
        env={**os.environ, "STRIPE_WEBHOOK_SECRET": "s", "OTEL_TRACES_EXPORTER": "bogus"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2
    assert out == b""
    assert err.decode().splitlines() == [
        "inboxd-edge: OTEL_TRACES_EXPORTER: unknown exporter 'bogus'; the edge exports with otlp or console (or none)"
    ]


async def test_the_command_traces_by_the_otel_variables_as_inboxd_edge_and_flushes_its_spans_at_stop(
    server: RunningServer, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """The console exporter behind the SDK's batch processor, whose delay (60 s) leaves the flush to the stop."""
    config = tmp_path / "edge.toml"
    config.write_text(ROUTES_TOML.format(target=f"127.0.0.1:{server.port}"))
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "inboxd_edge",
        "--config",
        str(config),
        env={
            **environ,
            "STRIPE_WEBHOOK_SECRET": STRIPE_NEW_SECRET,
            "OTEL_TRACES_EXPORTER": "console",
            "OTEL_BSP_SCHEDULE_DELAY": "60000",
        },
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        assert line.startswith("inboxd-edge listening on "), line
        url = "http://" + line.rsplit(" ", 1)[1].strip()
        body = as_body({"id": "evt_traced", "type": "payment_intent.succeeded", "account": secrets.token_hex(4)})
        reply = await post(http, f"{url}/hooks/stripe", body, sign_stripe(body, STRIPE_NEW_SECRET))
        assert (reply.status, reply.outcome) == (200, "accepted")
    finally:
        proc.send_signal(signal.SIGTERM)
        printed, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0
    spans: list[dict[str, Any]] = []
    text, decoder, at = printed.decode(), json.JSONDecoder(), 0
    while (at := text.find("{", at)) != -1:
        document, at = decoder.raw_decode(text, at)
        spans.append(document)
    [span] = spans
    assert (span["name"], span["kind"], span["parent_id"]) == ("POST /hooks/stripe", "SpanKind.SERVER", None)
    assert span["attributes"]["inboxd.accept.outcome"] == "accepted"
    assert span["resource"]["attributes"]["service.name"] == "inboxd-edge"
