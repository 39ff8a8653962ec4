"""Admits a call on its metadata, before grpc reads its message: the token, the scope, and a size per method.

grpc.aio resolves a call's method handler (`GenericRpcHandler.service`, given
the path and the metadata) before it receives the message, and a
unary-request handler then waits for the whole message, up to
`grpc.max_receive_message_length`, before any of inboxd's code runs. So a
stranger's 31 MiB Accept used to be read, buffered and parsed only to be
answered UNAUTHENTICATED (32 of them at once grew the server by some 700 MB).
Here a call whose token is missing, unknown or lacks the method's scope gets a
*request-streaming* handler that aborts without asking for a message: grpc
then never reads its body, only what HTTP/2 flow control had let in.

A generic handler rather than a `grpc.aio.ServerInterceptor`: an interceptor is
one more coroutine on every call, this is one plain call per call; health
checks and reflection have a handler of their own (`api.open_services`).

The namespaces a call touches live in its message, so they are checked after
it is read (`api.handlers`), where each method's own size limit is applied too.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc

from inboxd.api.auth import authorize_scope, bearer_token
from inboxd.api.status import status_for
from inboxd.config.tokens import ANONYMOUS, Caller, TokenRegistry
from inboxd.domain.errors import InboxError

# (method name, status code, seconds): called once per RPC, after its answer is decided.
ObserveRpc = Callable[[str, grpc.StatusCode, float], None]
# One admitted call: who calls, the decoded request (or a marker), its context.
Handle = Callable[[Caller, Any, grpc.aio.ServicerContext[Any, Any]], Awaitable[Any]]
# Hears where each call came from (`context.peer()`) and whether its caller had a valid token
# (serving.stranger_connections closes connections that only strangers use).
CallSeen = Callable[[str, bool], None]

MiB = 1024 * 1024
# What one message of a method other than Accept, AcceptBatch, Claim and
# CompleteBatch may be: identity fields of 512 bytes, texts of 4 KiB, and a
# Fail's error text (stored truncated, so sent long): 1 MiB leaves room to spare.
SMALL_MESSAGE_BYTES = 1 * MiB
# A Claim or CompleteBatch: 500 completions of at most about 6 KiB each, plus
# a Claim's 100 namespaces and 100 event types of 512 bytes.
COMPLETIONS_MESSAGE_BYTES = 4 * MiB


# Lists a request may name, by method name: (field, most entries). Checked once
# the message is decoded, before the namespace checks walk them. (AcceptBatch's
# events and CompleteBatch's completions are batches, checked by the servicer.)
MAX_CLAIM_FILTERS = 100
LIST_LIMITS: dict[str, tuple[tuple[str, int], ...]] = {
    "Claim": (("namespaces", MAX_CLAIM_FILTERS), ("event_types", MAX_CLAIM_FILTERS)),
}


# Methods whose message can only pass its limit through one field: the refusal is that field's
# INVALID_ARGUMENT, as the contract says of a payload over the size limit, not RESOURCE_EXHAUSTED.
OVERSIZE_FIELDS: dict[str, str] = {"Accept": "payload"}


def receive_limits(batch_bytes: int, one_event_bytes: int) -> dict[str, int]:
    """The most bytes a message of each method may be, by method name; others take SMALL_MESSAGE_BYTES."""
    return {
        "Accept": one_event_bytes,
        # Per message: one item is one Accept, and its sequence.
        "AcceptStream": one_event_bytes + STREAM_ITEM_OVERHEAD,
        "AcceptBatch": batch_bytes,
        "Claim": COMPLETIONS_MESSAGE_BYTES,
        "CompleteBatch": COMPLETIONS_MESSAGE_BYTES,
        # Per message: at most a CompleteBatch, or a subscription as big as a Claim's filters.
        "Work": COMPLETIONS_MESSAGE_BYTES,
    }


# An AcceptStreamRequest around its AcceptRequest: the sequence (at most 11
# bytes with its tag) and the accept field's tag and length (at most 6).
STREAM_ITEM_OVERHEAD = 32

_MOST_CACHED = 4096


@dataclass(frozen=True, slots=True)
class Method:
    """One RPC as admission serves it: `handle` runs once the call is admitted and its message read."""

    name: str
    handle: Handle
    request_deserializer: Callable[[bytes], object]
    response_serializer: Callable[[Any], bytes]
    # Both ways streaming (AcceptStream): `handle` takes the request iterator and yields answers.
    streaming: bool = False


if TYPE_CHECKING:
    _GenericHandler = grpc.GenericRpcHandler[Any, Any]
else:  # generic only in the stubs
    _GenericHandler = grpc.GenericRpcHandler


class Admission(_GenericHandler):
    """Routes inboxd's paths: refused on metadata, or to the method's handler with its caller bound.

    `registry` None means every caller is ANONYMOUS (loopback only): nothing to refuse.
    """

    def __init__(
        self,
        methods: Mapping[str, Method],
        registry: TokenRegistry | None,
        observe: ObserveRpc,
        seen: CallSeen | None = None,
    ) -> None:
        self._methods = dict(methods)
        self._registry = registry
        self._observe = observe
        self._seen = seen
        # Without tokens every call gets the same handler: built once.
        self._open = {path: _admitted(method, ANONYMOUS) for path, method in self._methods.items()}
        # With tokens, one per method and caller: building a handler costs some 5 µs, a call 250.
        # The registry hands out one Caller per entry until a reload; the entry keeps it alive.
        self._admitted: dict[tuple[str, int], tuple[Caller, grpc.RpcMethodHandler[Any, Any]]] = {}

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler[Any, Any] | None:
        path = handler_call_details.method
        method = self._methods.get(path)
        if method is None:
            return None
        if self._registry is None:
            return self._open[path]
        try:
            caller = self._registry.authenticate(bearer_token(handler_call_details.invocation_metadata))
            authorize_scope(caller, path)
        except InboxError as exc:
            return self._refusal(method.name, exc)
        key = (path, id(caller))
        cached = self._admitted.get(key)
        if cached is not None and cached[0] is caller:
            return cached[1]
        if len(self._admitted) >= _MOST_CACHED:  # reloads leave old callers behind
            self._admitted.clear()
        handler = _admitted(method, caller, self._seen)
        self._admitted[key] = (caller, handler)
        return handler

    def _refusal(self, name: str, exc: InboxError) -> grpc.RpcMethodHandler[Any, Any]:
        code = status_for(exc)
        details = str(exc)
        observe = self._observe
        seen = self._seen

        # Request-streaming, and it never iterates its requests: grpc reads no message for it.
        async def refuse(requests: object, context: grpc.aio.ServicerContext[Any, Any]) -> None:
            started = time.perf_counter()
            if seen is not None:
                seen(context.peer(), False)
            try:
                await context.abort(code, details)
            finally:
                observe(name, code, time.perf_counter() - started)

        return grpc.stream_unary_rpc_method_handler(refuse)


def _admitted(method: Method, caller: Caller, seen: CallSeen | None = None) -> grpc.RpcMethodHandler[Any, Any]:
    handle: Any = functools.partial(method.handle, caller)
    if method.streaming:
        # Admitted once per stream: its messages are judged by `handle`, each alone.
        return grpc.stream_stream_rpc_method_handler(
            handle if seen is None else _vouching_stream(handle, seen),
            request_deserializer=method.request_deserializer,
            response_serializer=method.response_serializer,
        )
    return grpc.unary_unary_rpc_method_handler(
        handle if seen is None else _vouching(handle, seen),
        request_deserializer=method.request_deserializer,
        response_serializer=method.response_serializer,
    )


def _vouching(handle: Any, seen: CallSeen) -> Any:
    """`handle`, first saying that its connection carries a call with a valid token."""

    async def vouched(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        seen(context.peer(), True)
        return await handle(request, context)

    return vouched


def _vouching_stream(handle: Any, seen: CallSeen) -> Any:
    """A stream's `handle` (an async generator), first saying that its connection carries a call with a valid token."""

    async def vouched(requests: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
        seen(context.peer(), True)
        # Closed with the stream, however it ends, as `handle` closes what it runs.
        async with contextlib.aclosing(handle(requests, context)) as answers:
            async for answer in answers:
                yield answer

    return vouched
