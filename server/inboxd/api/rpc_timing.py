"""Times each RPC and tells an observer its method, status code and duration (for metrics)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from google.protobuf import message

Behaviour = Callable[[Any, grpc.aio.ServicerContext[Any, Any]], Awaitable[message.Message]]
# (method name, status code, seconds): called once per RPC, after its answer is decided.
ObserveRpc = Callable[[str, grpc.StatusCode, float], None]


def timed(method_name: str, handle: Behaviour, observe: ObserveRpc) -> Behaviour:
    async def run(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> message.Message:
        started = time.perf_counter()
        code = grpc.StatusCode.UNKNOWN
        try:
            response = await handle(request, context)
            code = grpc.StatusCode.OK
            return response
        except asyncio.CancelledError:
            code = grpc.StatusCode.CANCELLED
            raise
        except Exception:
            # context.abort() records its code before raising; anything else
            # escaping a handler reaches the caller as UNKNOWN.
            code = _code_of(context)
            raise
        finally:
            observe(method_name, code, time.perf_counter() - started)

    return run


def _code_of(context: grpc.aio.ServicerContext[Any, Any]) -> grpc.StatusCode:
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code
    # Some grpc versions keep the raw integer status.
    for candidate in grpc.StatusCode:
        if candidate.value[0] == code:
            return candidate
    return grpc.StatusCode.UNKNOWN
