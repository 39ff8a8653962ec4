"""The HTTP handler: URL checks, size check, signature, parse, event type, key, Accept, in that order.

The order is the point. A provider's unsigned URL check (Meta's GET, Graph's
validationToken) is answered first and a signed one right after its signature
holds, before anything is named (inboxd_edge.handshakes): neither reaches
inboxd. The body's size is checked before it is read in full,
the signature before the body is parsed, and the provider hears 2xx only once
inboxd has answered Accept with OK. The body goes to Accept as it arrived,
with its Content-Type, and the signature's inputs with it (inboxd_edge.evidence).
Each request logs one line: route, status, outcome, event type and delivery
id (and, when traced, the trace and span ids). Never the body, the key or a
secret. With tracing on, each request is one SERVER span (inboxd_edge.tracing)
whose context goes on the Accept; off, the provider's own context does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping

from aiohttp import web
from multidict import CIMultiDict
from opentelemetry.trace import Tracer

from inboxd_client.v1 import types_pb2
from inboxd_edge import edge_metrics, observations
from inboxd_edge.bodies import document
from inboxd_edge.config import EdgeConfig, Route
from inboxd_edge.evidence import signature_metadata
from inboxd_edge.forward import Answer, Forwarder
from inboxd_edge.handshakes import GET_HANDSHAKES, Handshake, after_signature, before_signature
from inboxd_edge.identity import constrained_path, placeholder_values_fit
from inboxd_edge.items import other_type as _other_type
from inboxd_edge.items import receive_items
from inboxd_edge.keys import UnsupportedType, resolve
from inboxd_edge.reply import Reply
from inboxd_edge.signatures import SignatureError, StandardWebhooksVerifier, standard_headers
from inboxd_edge.sources import MissingValue, Request
from inboxd_edge.tracing import forwarded_context, request_span
from inboxd_edge.twilio_signature import public_url

log = logging.getLogger("inboxd_edge")

Clock = Callable[[], float]
Handler = Callable[[web.Request], Awaitable[web.Response]]
# How long a provider should wait before retrying after a 503.
RETRY_AFTER_SECONDS = "5"
# [limits] body_timeout_seconds' default: from a request's headers until its whole body is in.
BODY_TIMEOUT_SECONDS = 30.0


def build_app(
    config: EdgeConfig, forwarder: Forwarder, *, clock: Clock = time.time, tracer: Tracer | None = None
) -> web.Application:
    """An aiohttp application with one POST handler per configured route; `tracer` None is tracing off."""
    app = web.Application()
    body_timeout = config.ops.limits.body_timeout_seconds
    for route in config.routes:
        handler = _handler(route, forwarder, clock, tracer, body_timeout)
        app.router.add_post(constrained_path(route.path), handler)
        if route.handshake in GET_HANDSHAKES:
            # GET for Meta's subscribe check (and HEAD with it, which Mandrill's check is).
            app.router.add_get(constrained_path(route.path), handler)
        edge_metrics.route_ready(route.name)
    return app


def _handler(route: Route, forwarder: Forwarder, clock: Clock, tracer: Tracer | None, body_timeout: float) -> Handler:
    async def handle(request: web.Request) -> web.Response:
        traced: Mapping[str, str] = {}
        if tracer is None:
            # Tracing off is free: no span, only the provider's own context passed on, if it sent a valid one.
            reply = await receive(
                route, forwarder, clock, request, forwarded_context(request.headers), body_timeout=body_timeout
            )
        else:
            with request_span(tracer, route.path, request) as span:
                reply = await receive(route, forwarder, clock, request, span.trace_context, body_timeout=body_timeout)
                span.answered(reply.answer.status, reply.answer.outcome, reply.event)
                traced = span.log_fields
        edge_metrics.count_request(route.name, reply.answer.status, reply.answer.outcome)
        if reply.answer.outcome == "unauthenticated":
            edge_metrics.count_signature_failure(route.name, reply.reason)
        fields = {
            "route": route.name,
            "status": str(reply.answer.status),
            "outcome": reply.answer.outcome,
            "reason": reply.reason or "-",
            "type": reply.event_type or "-",
            "delivery": reply.delivery_id or "-",
            **traced,
        }
        # A 500 is the edge's or inboxd's own fault (a refused token, say), which no provider retry fixes: an error.
        # The fields ride along for [log] format = "json" (inboxd_edge.edge_logs), which writes them as members.
        level = logging.ERROR if reply.answer.status == 500 else logging.INFO
        log.log(level, "%s", log_line(**fields), extra={"fields": fields})
        if reply.handshake is not None:
            shake = reply.handshake
            # nosniff: an echoed challenge is text for the provider, never a page for a browser.
            return web.Response(
                body=shake.body,
                status=shake.status,
                content_type=shake.content_type,
                headers={"X-Content-Type-Options": "nosniff"},
            )
        headers = {"Retry-After": RETRY_AFTER_SECONDS} if reply.answer.status == 503 else None
        return web.json_response({"outcome": reply.answer.outcome}, status=reply.answer.status, headers=headers)

    return handle


def log_line(**fields: str) -> str:
    """One logfmt line with every value quoted and escaped.

    The event type and the delivery id come from the request, unsigned where a
    preset reads them from headers: quoted, a value can never pose as another
    field (`x route=admin status=200`) nor start a new line or move the cursor.
    """
    return " ".join(f'{name}="{_escaped(value)}"' for name, value in fields.items())


def _escaped(value: str) -> str:
    out: list[str] = []
    for char in value:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif code < 0x20 or 0x7F <= code <= 0x9F or code in (0x2028, 0x2029):
            out.append(f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}")
        else:
            out.append(char)
    return "".join(out)


async def receive(
    route: Route,
    forwarder: Forwarder,
    clock: Clock,
    request: web.Request,
    trace_context: types_pb2.TraceContext | None = None,
    *,
    body_timeout: float = BODY_TIMEOUT_SECONDS,
) -> Reply:
    """Runs one webhook through the route and says what to answer; `trace_context` goes on its Accept."""
    verifier = route.verifier_for(request.match_info)
    if verifier is None or not placeholder_values_fit(request.match_info):
        # No secret for this account (or no account by that name could be configured): nothing to verify with.
        return Reply(Answer(404, "not_found"), reason="no secret for this path")
    if shake := before_signature(route.handshake, request.method, request.query, route.verify_token):
        return _handshake(route, shake)
    if request.method != "POST":
        return Reply(Answer(405, "method_not_allowed"))
    try:
        # A body sent slower than this holds a connection for nothing: 408, and aiohttp closes it.
        async with asyncio.timeout(body_timeout):
            body = await _read_limited(request, route.max_body_bytes)
    except TimeoutError:
        return Reply(Answer(408, "body_timeout"), reason=f"body not in within {body_timeout:g} s")
    if body is None:
        return Reply(Answer(413, "too_large"))
    url = public_url(route.public_url, request.match_info, request.rel_url.raw_query_string) if route.public_url else ""
    try:
        verifier.verify(body, request.headers, clock(), url, request.method)
    except SignatureError as exc:
        observations.signature_failure(route.name, str(exc))
        return Reply(Answer(401, "unauthenticated"), reason=str(exc))
    # As sent, parameters and all: inboxd stores it with the payload ("" lets inboxd say application/json).
    content_type = request.headers.get("Content-Type", "").strip()
    try:
        parsed = document(body, content_type)
    except ValueError as exc:
        return Reply(Answer(400, "malformed"), reason=str(exc))
    if shake := after_signature(route.handshake, parsed, verifier):
        return _handshake(route, shake)
    headers = readable_headers(verifier, request.headers)
    if route.items is not None:
        return await receive_items(
            route,
            forwarder,
            document=parsed,
            headers=headers,
            path_params=dict(request.match_info),
            trace_context=trace_context,
        )
    source_request = Request(parsed, headers, dict(request.match_info), body)
    signature = signature_metadata(verifier, request.headers, url)
    try:
        event = resolve(route, source_request, content_type=content_type, signature=signature)
    except UnsupportedType as exc:
        return _other_type(route, str(exc))
    except MissingValue as exc:
        return Reply(Answer(400, "malformed"), reason=str(exc))
    started = time.monotonic()
    answer = await forwarder.accept(event, trace_context)
    edge_metrics.observe_forward(route.name, time.monotonic() - started)
    return Reply(answer, event_type=event.event_type, delivery_id=event.delivery_id, event=event)


def _handshake(route: Route, shake: Handshake) -> Reply:
    observations.handshake(route.name, shake.kind)
    return Reply(Answer(shake.status, "handshake"), reason=shake.kind, handshake=shake)


def readable_headers(verifier: object, headers: Mapping[str, str]) -> Mapping[str, str]:
    """The headers sources read: a Standard Webhooks delivery's svix-* values also under their webhook-* names."""
    if not isinstance(verifier, StandardWebhooksVerifier):
        return headers
    merged = CIMultiDict(headers)
    for name, value in standard_headers(headers).items():
        merged[name] = value
    return merged


async def _read_limited(request: web.Request, limit: int) -> bytes | None:
    """The whole body, or None once it passes `limit` (read no further than that)."""
    if request.content_length is not None and request.content_length > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.content.iter_any():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)
