"""Builds the gRPC method handlers for a servicer, straight from the service descriptor.

Two things the generated `add_*Servicer_to_server` cannot do:
- a request that does not decode (invalid UTF-8 in a string field, say) must
  be INVALID_ARGUMENT, but grpc answers UNKNOWN before any servicer code runs;
  so the deserializer catches the decode error and hands over a marker;
- domain errors become status codes through one table, in one place.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import message, message_factory
from google.protobuf.descriptor import ServiceDescriptor

from inboxd.api.rpc_timing import ObserveRpc, timed
from inboxd.api.status import status_for
from inboxd.errors import InboxError

log = logging.getLogger(__name__)

Behaviour = Callable[[Any, grpc.aio.ServicerContext[Any, Any]], Awaitable[message.Message]]


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


def _wrap(method_name: str, behaviour: Behaviour | None) -> Behaviour:
    async def handle(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> message.Message:
        if isinstance(request, MalformedRequest):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"malformed request: {request.problem}")
        if behaviour is None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{method_name} is not implemented yet")
        assert behaviour is not None
        try:
            return await behaviour(request, context)
        except InboxError as exc:
            await context.abort(status_for(exc), str(exc))
        raise AssertionError("unreachable: abort raises")

    return handle


def generic_handler(
    service: ServiceDescriptor, servicer: object, observe: ObserveRpc | None = None
) -> grpc.GenericRpcHandler[Any, Any]:
    """One handler for every RPC of `service`; methods the servicer lacks are UNIMPLEMENTED.

    `observe(method, code, seconds)` hears how each call ended (for metrics).
    """
    handlers = {}
    for method in service.methods:
        request_cls = message_factory.GetMessageClass(method.input_type)
        response_cls = message_factory.GetMessageClass(method.output_type)
        behaviour = getattr(servicer, method.name, None)
        handle = _wrap(method.name, behaviour)
        handlers[method.name] = grpc.unary_unary_rpc_method_handler(
            timed(method.name, handle, observe) if observe else handle,
            request_deserializer=_safe_deserializer(request_cls),
            response_serializer=response_cls.SerializeToString,
        )
    return grpc.method_handlers_generic_handler(service.full_name, handlers)
