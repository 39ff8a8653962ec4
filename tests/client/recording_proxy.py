"""A gRPC proxy on a real port that forwards every call to a real server and keeps what each call carried.

The tests of trace propagation ask what the server saw: a call's metadata, and
each message it sent (a Work stream's call messages carry their own trace
context). Every method is forwarded as a stream of raw bytes (on the wire a
unary call is a stream of one), answers and status codes included.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc


@dataclass
class SeenCall:
    """One call through the proxy: its method path, its metadata, the raw messages it sent."""

    method: str
    metadata: dict[str, str]
    requests: list[bytes] = field(default_factory=list)


class RecordingProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.calls: list[SeenCall] = []
        self.port = 0
        self._server: grpc.aio.Server | None = None
        self._channel: grpc.aio.Channel | None = None

    def of(self, method: str) -> list[SeenCall]:
        """The calls of one method (its last path segment: "Complete", "Work")."""
        return [call for call in self.calls if call.method.rsplit("/", 1)[-1] == method]

    async def start(self) -> RecordingProxy:
        self._channel = grpc.aio.insecure_channel(self.upstream)
        self._server = grpc.aio.server()
        self._server.add_generic_rpc_handlers((_Forward(self),))
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        await self._server.start()
        return self

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(0.5)
        if self._channel is not None:
            await self._channel.close(None)

    async def forward(self, requests: AsyncIterator[bytes], context: Any, method: str) -> AsyncIterator[bytes]:
        metadata = tuple((k, v) for k, v in context.invocation_metadata() if not k.startswith(":"))
        seen = SeenCall(method, {k: v for k, v in metadata if isinstance(v, str)})
        self.calls.append(seen)

        async def sent() -> AsyncIterator[bytes]:
            async for request in requests:
                seen.requests.append(request)
                yield request

        assert self._channel is not None
        raw = self._channel.stream_stream(method, request_serializer=None, response_deserializer=None)
        call = raw(sent(), metadata=_forwardable(metadata))
        try:
            async for response in call:
                yield response
        except grpc.aio.AioRpcError as exc:
            await context.abort(exc.code(), exc.details() or "")
        finally:
            call.cancel()


def _forwardable(metadata: tuple[tuple[str, Any], ...]) -> tuple[tuple[str, Any], ...]:
    return tuple((k, v) for k, v in metadata if k != "user-agent" and not k.startswith("grpc-"))


class _Forward(grpc.GenericRpcHandler):  # type: ignore[type-arg]
    def __init__(self, proxy: RecordingProxy) -> None:
        self._proxy = proxy

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:  # type: ignore[type-arg]
        method = str(handler_call_details.method)

        # An async generator function itself: grpc.aio tells a streaming behaviour by its kind.
        async def behaviour(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
            async for response in self._proxy.forward(requests, context, method):
                yield response

        return grpc.stream_stream_rpc_method_handler(behaviour)


@contextlib.asynccontextmanager
async def recording_proxy(upstream: str) -> AsyncIterator[RecordingProxy]:
    proxy = await RecordingProxy(upstream).start()
    try:
        yield proxy
    finally:
        await proxy.stop()
