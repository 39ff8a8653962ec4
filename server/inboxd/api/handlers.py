"""Builds the gRPC method handlers for a servicer, straight from the service descriptor.

Each method gets one wrapper, built once at start-up, that does in order
everything a call needs once `api.admission` has admitted it on its
metadata (token and scope) and grpc has read its message: the method's size
limit, the malformed-request check, the bounds of its lists, the namespace
checks, the deadline check, the mapping of domain errors to status codes
(one table, `api.status`), and timing for the metrics. While tracing is
on, `api.rpc_spans` wraps it once more in the call's span; while it is off,
the handlers are built without it. One wrapper rather
than an interceptor and a stack of decorators: each layer is a coroutine per
call, and this is the hot path.

A request that does not decode (invalid UTF-8 in a string field, say) must
be INVALID_ARGUMENT, but grpc answers UNKNOWN before any servicer code runs;
so the deserializer catches the decode error and hands over a marker. It
also measures the bytes first: a message over its method's limit is never
parsed (ten million one-byte strings in a 28 MiB Claim held the loop for seconds).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import traceback
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import message, message_factory
from google.protobuf.descriptor import ServiceDescriptor

from inboxd.api.admission import (
    LIST_LIMITS,
    OVERSIZE_FIELDS,
    SMALL_MESSAGE_BYTES,
    Admission,
    CallSeen,
    Handle,
    Method,
    ObserveRpc,
)
from inboxd.api.auth import RULES, authorize_namespaces
from inboxd.api.convert import check_batch_size
from inboxd.api.identity import set_caller
from inboxd.api.live_streams import LiveStreams
from inboxd.api.rpc_spans import observing_spans, traced_stream, traced_unary
from inboxd.api.status import status_for
from inboxd.config.tokens import Caller, TokenRegistry
from inboxd.domain.errors import InboxError, InvalidArgument, TooManyRequests
from inboxd.observability import tracing

log = logging.getLogger(__name__)

Behaviour = Callable[[Any, grpc.aio.ServicerContext[Any, Any]], Awaitable[message.Message]]
# A both-ways streaming method: decoded requests in, answers out.
StreamBehaviour = Callable[
    [AsyncIterator[Any], grpc.aio.ServicerContext[Any, Any]], AsyncGenerator[message.Message, None]
]


@dataclass(frozen=True, slots=True)
class MalformedRequest:
    """Stands in for a request whose bytes did not decode."""

    problem: str


@dataclass(frozen=True, slots=True)
class OversizedRequest:
    """Stands in for a request over its method's size limit: its bytes were not parsed."""

    size: int
    limit: int


def _safe_deserializer(cls: type[message.Message], limit: int) -> Callable[[bytes], object]:
    def deserialize(data: bytes) -> object:
        if len(data) > limit:
            return OversizedRequest(len(data), limit)
        try:
            return cls.FromString(data)
        except message.DecodeError as exc:
            return MalformedRequest(str(exc) or "the request is not a valid protobuf message")
        except Exception as exc:  # noqa: BLE001 - any decode failure is the caller's bytes
            return MalformedRequest(f"the request does not decode: {exc}")

    return deserialize


def _wrap(
    path: str, method_name: str, behaviour: Behaviour | None, checks_namespaces: bool, observe: ObserveRpc
) -> Handle:
    """The one coroutine an admitted call of `path` runs; `checks_namespaces` False: no tokens (loopback only)."""
    lists = LIST_LIMITS.get(method_name, ())

    async def handle(caller: Caller, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> message.Message:
        started = time.perf_counter()
        code = grpc.StatusCode.UNKNOWN
        try:
            try:
                if isinstance(request, OversizedRequest):
                    too_big = f"the request is {request.size} bytes; {method_name} takes at most {request.limit}"
                    field = OVERSIZE_FIELDS.get(method_name)
                    code = grpc.StatusCode.INVALID_ARGUMENT if field else grpc.StatusCode.RESOURCE_EXHAUSTED
                    await context.abort(code, f"{field}: {too_big}" if field else too_big)
                if isinstance(request, MalformedRequest):
                    code = grpc.StatusCode.INVALID_ARGUMENT
                    await context.abort(code, f"malformed request: {request.problem}")
                for field, most in lists:
                    check_batch_size(field, len(getattr(request, field)), most, least=0)
                if checks_namespaces:
                    authorize_namespaces(caller, path, request)
                if behaviour is None:
                    code = grpc.StatusCode.UNIMPLEMENTED
                    await context.abort(code, f"{method_name} is not implemented yet")
                remaining = context.time_remaining()
                if remaining is not None and remaining <= 0:
                    code = grpc.StatusCode.DEADLINE_EXCEEDED
                    await context.abort(code, "the deadline passed before the call began")
                set_caller(caller)
                assert behaviour is not None
                response = await behaviour(request, context)
                code = grpc.StatusCode.OK
                return response
            except InboxError as exc:
                code = status_for(exc)
                await context.abort(code, str(exc))
                raise AssertionError("unreachable: abort raises") from None
            except grpc.aio.AbortError:
                raise
            except Exception as exc:  # noqa: BLE001 - logged without its text, answered INTERNAL
                code = grpc.StatusCode.INTERNAL
                _log_unexpected(method_name, exc)
                await context.abort(code, "internal error")
                raise AssertionError("unreachable: abort raises") from None
        except asyncio.CancelledError:
            code = grpc.StatusCode.CANCELLED
            raise
        finally:
            observe(method_name, code, time.perf_counter() - started)

    return handle


async def _decoded(requests: AsyncIterable[Any], method_name: str) -> AsyncIterator[Any]:
    """A stream's requests, each decoded; one that is not ends the stream, since its sequence is unknown."""
    async for request in requests:
        if isinstance(request, OversizedRequest):
            raise TooManyRequests(
                f"a message of the stream is {request.size} bytes; {method_name} takes at most {request.limit} each"
            )
        if isinstance(request, MalformedRequest):
            raise InvalidArgument("message", f"malformed stream message: {request.problem}")
        yield request


def _wrap_stream(
    path: str, method_name: str, behaviour: StreamBehaviour | None, observe: ObserveRpc, live: LiveStreams
) -> Any:
    """The async generator an admitted stream of `method_name` runs; its items are judged by `behaviour`.

    The caller was admitted on the stream's metadata (once); namespaces live in
    each item, so `behaviour` checks them item by item. An error raised here
    ends the stream; an item's refusal is an answer, never raised. `live`
    counts the caller's open streams and ends this one when a reload of the
    tokens file takes its token away (api/live_streams.py).
    """
    scope = RULES[path][0]

    async def handle(
        caller: Caller, requests: AsyncIterable[Any], context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[message.Message]:
        started = time.perf_counter()
        code = grpc.StatusCode.UNKNOWN
        try:
            try:
                if behaviour is None:
                    code = grpc.StatusCode.UNIMPLEMENTED
                    await context.abort(code, f"{method_name} is not implemented yet")
                stream = live.open(method_name, scope, caller)
                try:
                    set_caller(caller)
                    assert behaviour is not None
                    judged = _decoded(stream.requests(requests), method_name)
                    # Closed with the stream, however it ends: its reader and items are let go at once, not at GC.
                    async with contextlib.aclosing(behaviour(judged, context)) as answers:
                        async for answer in answers:
                            yield answer
                finally:
                    live.close(stream)
                code = grpc.StatusCode.OK
            except InboxError as exc:
                code = status_for(exc)
                await context.abort(code, str(exc))
            except grpc.aio.AbortError:
                raise
            except Exception as exc:  # noqa: BLE001 - logged without its text, answered INTERNAL
                code = grpc.StatusCode.INTERNAL
                _log_unexpected(method_name, exc)
                await context.abort(code, "internal error")
        except (asyncio.CancelledError, GeneratorExit):
            code = grpc.StatusCode.CANCELLED
            raise
        finally:
            observe(method_name, code, time.perf_counter() - started)

    return handle


def _log_unexpected(method_name: str, exc: Exception) -> None:
    """An unexpected exception, logged by its type, first line and frames, never its whole text.

    grpc's own log of it would print the text whole, and a database error's
    runs on with PostgreSQL's DETAIL line, which names the row's raw key.
    """
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    frames = "".join(traceback.format_tb(exc.__traceback__))
    log.error("unexpected %s in %s: %s\n%s", type(exc).__name__, method_name, first, frames.rstrip())


# Beyond anything grpc takes (its limits are a C int).
_NO_LIMIT = 2**63


def _unobserved(method: str, code: grpc.StatusCode, seconds: float) -> None:
    pass


def generic_handler(
    service: ServiceDescriptor,
    servicer: object,
    observe: ObserveRpc | None = None,
    registry: TokenRegistry | None = None,
    receive_limits: Mapping[str, int] | None = None,
    *,
    seen: CallSeen | None = None,
    max_streams_per_caller: int | None = None,
) -> grpc.GenericRpcHandler[Any, Any]:
    """One handler for every RPC of `service`; methods the servicer lacks are UNIMPLEMENTED.

    `observe(method, code, seconds)` hears how each call ended (for metrics),
    refusals by authentication included. `receive_limits` gives a method's
    most bytes by its name (`api.admission.receive_limits`); others then take
    SMALL_MESSAGE_BYTES. None: only grpc's server-wide limit applies.
    `seen(peer, vouched)` hears where each call came from (`api.admission.CallSeen`).
    `max_streams_per_caller`: the open streams of each kind one caller may
    hold (None: no bound); a reload of `registry` judges them all again.
    """
    limits = receive_limits
    methods = {}
    # Decided once, here: with tracing off the handlers are exactly the untraced ones.
    traced = tracing.TRACER is not None
    observed = observe or _unobserved
    if traced:
        observed = observing_spans(observed)
    live: LiveStreams | None = None
    for method in service.methods:
        request_cls = message_factory.GetMessageClass(method.input_type)
        response_cls = message_factory.GetMessageClass(method.output_type)
        behaviour = getattr(servicer, method.name, None)
        path = f"/{service.full_name}/{method.name}"
        streaming = method.client_streaming and method.server_streaming
        if streaming:
            if live is None:
                live = LiveStreams(max_streams_per_caller, registry)
            handle = _wrap_stream(path, method.name, behaviour, observed, live)
            if traced:
                handle = traced_stream(path, handle)
        else:
            handle = _wrap(path, method.name, behaviour, registry is not None, observed)
            if traced:
                handle = traced_unary(path, handle)
        methods[path] = Method(
            name=method.name,
            handle=handle,
            request_deserializer=_safe_deserializer(
                request_cls, _NO_LIMIT if limits is None else limits.get(method.name, SMALL_MESSAGE_BYTES)
            ),
            response_serializer=response_cls.SerializeToString,
            streaming=streaming,
        )
    return Admission(methods, registry, observe or _unobserved, seen)
