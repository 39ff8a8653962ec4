"""Health checking and reflection behind inboxd's own handler: open to probes, never a stranger's 31 MiB read at once.

grpc has one receive limit per server, and AcceptBatch needs 32 MiB; a
handler that asks for its message gets all of it, up to that limit, before
any of inboxd's code can look at its size. Registered the usual way (grpc's
own health and reflection handlers), both read every stranger's message in
full: 32 health checks of 31 MiB each took a server from 74 MB to 2.3 GB.
Nothing in a call's headers tells its message's size, so a size limit alone
cannot help; what can is who asks and how many are read at once:

- reflection, when there is a tokens file, takes any valid token (every
  scope will do) and refuses a caller without one on its headers, unread,
  like inboxd's own methods (`api.admission`);
- health checking stays open, as probes send no token. A caller with a
  valid token is read as ever; a stranger's message is read only once
  `STRANGER_READS` of them at a time, with at most `STRANGER_WAITING`
  waiting (each holds at most its 64 KiB stream window meanwhile; beyond
  that, RESOURCE_EXHAUSTED unread), and must arrive within
  `STRANGER_READ_SECONDS`;
- every message is measured before it is parsed, against a limit of its
  own (a health check names one service; a reflection request one symbol).

Without a tokens file (loopback only) every call is open, as every inboxd
method is, and nothing is queued.
"""

from __future__ import annotations

import asyncio
import ctypes
from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc
from google.protobuf import message
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2

from inboxd.api.admission import CallSeen
from inboxd.api.auth import bearer_token
from inboxd.api.status import status_for
from inboxd.config.tokens import TokenRegistry
from inboxd.domain.errors import InboxError

KiB = 1024
HEALTH_SERVICE = "grpc.health.v1.Health"
REFLECTION_SERVICE = "grpc.reflection.v1alpha.ServerReflection"
CHECK = f"/{HEALTH_SERVICE}/Check"
WATCH = f"/{HEALTH_SERVICE}/Watch"
REFLECT = f"/{REFLECTION_SERVICE}/ServerReflectionInfo"
# A HealthCheckRequest names one service: a few hundred bytes at most.
HEALTH_MESSAGE_BYTES = 4 * KiB
# A ServerReflectionRequest names one file, symbol or type, and a host.
REFLECTION_MESSAGE_BYTES = 64 * KiB
# A stranger's message is read only this many at a time: what grpc buffers for them is at most
# this many messages of the server-wide limit (32 MiB), whatever they declare.
STRANGER_READS = 1
# Strangers waiting for their turn to be read; more are refused unread (RESOURCE_EXHAUSTED).
STRANGER_WAITING = 16
# A stranger's message must arrive within this once its turn came: a slow sender cannot hold the turn.
STRANGER_READ_SECONDS = 2.0
# Open Watch streams without a token, in all; more are refused (RESOURCE_EXHAUSTED).
STRANGER_WATCHES = 256


if TYPE_CHECKING:
    _GenericHandler = grpc.GenericRpcHandler[Any, Any]
else:  # generic only in the stubs
    _GenericHandler = grpc.GenericRpcHandler


@dataclass(frozen=True, slots=True)
class _Refused:
    """Stands in for a message that is not read further: `code` and `details` are its answer."""

    code: grpc.StatusCode
    details: str


def _bounded(cls: type[message.Message], limit: int, name: str) -> Callable[[bytes], object]:
    """A deserializer that measures before it parses, and answers a marker rather than raising (grpc: UNKNOWN)."""

    def deserialize(data: bytes) -> object:
        if len(data) > limit:
            return _Refused(
                grpc.StatusCode.RESOURCE_EXHAUSTED, f"the request is {len(data)} bytes; {name} takes at most {limit}"
            )
        try:
            return cls.FromString(data)
        except Exception as exc:  # noqa: BLE001 - any decode failure is the caller's bytes
            return _Refused(grpc.StatusCode.INVALID_ARGUMENT, f"malformed request: {exc}")

    return deserialize


async def _judged(request: object, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
    if isinstance(request, _Refused):
        await context.abort(request.code, request.details)
    return request


def _malloc_trim() -> Callable[[int], object] | None:
    try:
        trim: Callable[[int], object] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
    return trim


_TRIM = _malloc_trim()


def release_freed_memory() -> None:
    """Hands the heap's free pages back to the system (glibc's malloc_trim), in every arena.

    A refused 31 MiB message is freed, but glibc keeps freed blocks that size
    in its heaps (its mmap threshold rises to them), in the loop's arena and in
    grpc's threads' own: 128 refused strangers read one at a time left a
    server 130 MB larger, though it held none of them.
    """
    if _TRIM is not None:
        _TRIM(0)


def _unseen(peer: str, vouched: bool) -> None:
    pass


class OpenServices(_GenericHandler):
    """Routes health checking and reflection: read as ever, refused on headers, or read in turn (strangers).

    `health` is grpc's asyncio HealthServicer, `reflection` its ReflectionServicer;
    `registry` None means no tokens (loopback only): every call is read as ever.
    `seen(peer, vouched)` hears of every call here, with or without a valid token.
    """

    def __init__(
        self, health: Any, reflection: Any, registry: TokenRegistry | None, seen: CallSeen | None = None
    ) -> None:
        self._health = health
        self._reflection = reflection
        self._registry = registry
        self._seen = seen or _unseen
        self._reading = asyncio.Semaphore(STRANGER_READS)
        self._waiting = 0
        self._watches = 0
        check_request = _bounded(health_pb2.HealthCheckRequest, HEALTH_MESSAGE_BYTES, "Check")
        watch_request = _bounded(health_pb2.HealthCheckRequest, HEALTH_MESSAGE_BYTES, "Watch")
        health_answer = health_pb2.HealthCheckResponse.SerializeToString
        reflect_request = _bounded(reflection_pb2.ServerReflectionRequest, REFLECTION_MESSAGE_BYTES, "reflection")
        reflect_answer = reflection_pb2.ServerReflectionResponse.SerializeToString
        self._known = {
            CHECK: grpc.unary_unary_rpc_method_handler(self._check, check_request, health_answer),
            WATCH: grpc.unary_stream_rpc_method_handler(self._watch, watch_request, health_answer),
            REFLECT: grpc.stream_stream_rpc_method_handler(self._reflect, reflect_request, reflect_answer),
        }
        # Request-streaming: grpc reads no message until the handler asks, so the turn comes first.
        self._strangers = {
            CHECK: grpc.stream_unary_rpc_method_handler(self._stranger_check, check_request, health_answer),
            WATCH: grpc.stream_stream_rpc_method_handler(self._stranger_watch, watch_request, health_answer),
        }

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler[Any, Any] | None:
        path = handler_call_details.method
        known = self._known.get(path)
        if known is None or self._registry is None:
            return known
        try:
            self._registry.authenticate(bearer_token(handler_call_details.invocation_metadata))
        except InboxError as exc:
            stranger = self._strangers.get(path)
            if stranger is not None:
                return stranger
            return _refusal(status_for(exc), f"reflection takes a token of any scope: {exc}", self._seen)
        return known

    async def _check(self, request: object, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        self._seen(context.peer(), self._registry is not None)
        return await self._health.Check(await _judged(request, context), context)

    async def _watch(self, request: object, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        self._seen(context.peer(), self._registry is not None)
        await self._health.Watch(await _judged(request, context), context)

    async def _reflect(self, requests: AsyncIterable[object], context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        self._seen(context.peer(), self._registry is not None)

        async def judged() -> AsyncIterator[Any]:
            async for request in requests:
                yield await _judged(request, context)

        async for answer in self._reflection.ServerReflectionInfo(judged(), context):
            yield answer

    async def _stranger_check(
        self, requests: AsyncIterator[object], context: grpc.aio.ServicerContext[Any, Any]
    ) -> Any:
        self._seen(context.peer(), False)
        request = await self._read_in_turn(requests, context)
        return await self._health.Check(request, context)

    async def _stranger_watch(
        self, requests: AsyncIterator[object], context: grpc.aio.ServicerContext[Any, Any]
    ) -> None:
        self._seen(context.peer(), False)
        if self._watches >= STRANGER_WATCHES:
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{STRANGER_WATCHES} health Watch streams without a token are open already; use Check, or a token",
            )
        self._watches += 1
        try:
            request = await self._read_in_turn(requests, context)
            await self._health.Watch(request, context)
        finally:
            self._watches -= 1

    async def _read_in_turn(self, requests: AsyncIterator[object], context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        """A stranger's one message, read when its turn comes; refused unread when too many wait."""
        if self._waiting >= STRANGER_WAITING:
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{STRANGER_WAITING} health checks without a token are waiting to be read already; try again",
            )
        self._waiting += 1
        queued = True
        try:
            async with self._reading:
                self._waiting -= 1
                queued = False
                try:
                    request = await asyncio.wait_for(anext(requests), STRANGER_READ_SECONDS)
                except TimeoutError:
                    request = _Refused(
                        grpc.StatusCode.RESOURCE_EXHAUSTED,
                        f"the request did not arrive within {STRANGER_READ_SECONDS} s of being asked for",
                    )
                except StopAsyncIteration:
                    request = _Refused(grpc.StatusCode.INVALID_ARGUMENT, "the call carried no request message")
                if isinstance(request, _Refused) and request.code == grpc.StatusCode.RESOURCE_EXHAUSTED:
                    # Still within the turn: the next stranger's bytes do not land on this one's.
                    release_freed_memory()
        finally:
            if queued:
                self._waiting -= 1
        return await _judged(request, context)


def _refusal(code: grpc.StatusCode, details: str, seen: CallSeen) -> grpc.RpcMethodHandler[Any, Any]:
    # Request-streaming, and it never iterates its requests: grpc reads no message for it.
    async def refuse(requests: object, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        seen(context.peer(), False)
        await context.abort(code, details)

    return grpc.stream_stream_rpc_method_handler(refuse)
