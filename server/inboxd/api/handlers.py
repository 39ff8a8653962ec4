"""Builds the gRPC method handlers for a servicer, straight from the service descriptor.

Each method gets one wrapper, built once at start-up, that does in order
everything a call needs before and after the servicer: authentication and
authorization, the malformed-request check, the deadline check, the mapping
of domain errors to status codes (one table, `api.status`), and timing for
the metrics. One wrapper rather than an interceptor and a stack of
decorators: each layer is a coroutine per call, and this is the hot path.

A request that does not decode (invalid UTF-8 in a string field, say) must
be INVALID_ARGUMENT, but grpc answers UNKNOWN before any servicer code runs;
so the deserializer catches the decode error and hands over a marker.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import message, message_factory
from google.protobuf.descriptor import ServiceDescriptor

from inboxd.api.auth import authorize, bearer_token
from inboxd.api.identity import set_caller
from inboxd.api.status import status_for
from inboxd.config.tokens import ANONYMOUS, TokenRegistry
from inboxd.domain.errors import InboxError

Behaviour = Callable[[Any, grpc.aio.ServicerContext[Any, Any]], Awaitable[message.Message]]
# (method name, status code, seconds): called once per RPC, after its answer is decided.
ObserveRpc = Callable[[str, grpc.StatusCode, float], None]


@dataclass(frozen=True, slots=True)
class MalformedRequest:
    """Stands in for a request whose bytes did not decode."""

    problem: str


def _safe_deserializer(cls: type[message.Message]) -> Callable[[bytes], object]:
    def deserialize(data: bytes) -> object:
        try:
            return cls.FromString(data)
        except message.DecodeError as exc:
            return MalformedRequest(str(exc) or "the request is not a valid protobuf message")
        except Exception as exc:  # noqa: BLE001 - any decode failure is the caller's bytes
            return MalformedRequest(f"the request does not decode: {exc}")

    return deserialize


def _wrap(
    path: str, method_name: str, behaviour: Behaviour | None, registry: TokenRegistry | None, observe: ObserveRpc
) -> Behaviour:
    """The one coroutine a call of `path` runs; `registry` None means every caller is ANONYMOUS (loopback only)."""

    async def handle(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> message.Message:
        started = time.perf_counter()
        code = grpc.StatusCode.UNKNOWN
        try:
            try:
                caller = (
                    ANONYMOUS
                    if registry is None
                    else registry.authenticate(bearer_token(context.invocation_metadata()))
                )
                if isinstance(request, MalformedRequest):
                    code = grpc.StatusCode.INVALID_ARGUMENT
                    await context.abort(code, f"malformed request: {request.problem}")
                if registry is not None:
                    authorize(caller, path, request)
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
        except asyncio.CancelledError:
            code = grpc.StatusCode.CANCELLED
            raise
        finally:
            observe(method_name, code, time.perf_counter() - started)

    return handle


def _unobserved(method: str, code: grpc.StatusCode, seconds: float) -> None:
    pass


def generic_handler(
    service: ServiceDescriptor,
    servicer: object,
    observe: ObserveRpc | None = None,
    registry: TokenRegistry | None = None,
) -> grpc.GenericRpcHandler[Any, Any]:
    """One handler for every RPC of `service`; methods the servicer lacks are UNIMPLEMENTED.

    `observe(method, code, seconds)` hears how each call ended (for metrics),
    refusals by authentication included.
    """
    handlers = {}
    for method in service.methods:
        request_cls = message_factory.GetMessageClass(method.input_type)
        response_cls = message_factory.GetMessageClass(method.output_type)
        behaviour = getattr(servicer, method.name, None)
        path = f"/{service.full_name}/{method.name}"
        handlers[method.name] = grpc.unary_unary_rpc_method_handler(
            _wrap(path, method.name, behaviour, registry, observe or _unobserved),
            request_deserializer=_safe_deserializer(request_cls),
            response_serializer=response_cls.SerializeToString,
        )
    return grpc.method_handlers_generic_handler(service.full_name, handlers)
