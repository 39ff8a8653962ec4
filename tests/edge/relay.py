"""A real gRPC server in front of inboxd, for the edge's stream tests: it forwards, counts, and breaks on cue.

Unary Accept is forwarded as it comes. AcceptStream, when served, answers
each item by forwarding it as a unary Accept, so what inboxd stores and
answers is inboxd's own; without it the relay is a server that lacks
AcceptStream (grpc answers UNIMPLEMENTED), as an older inboxd would.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio

from inboxd_client.v1 import inbox_pb2, inbox_pb2_grpc

SERVICE = "inboxd.v1.InboxService"


class Relay:
    """Forwards to inboxd at `target`; `streams` False: no AcceptStream at all."""

    def __init__(self, target: str, *, streams: bool = True) -> None:
        self._upstream = grpc.aio.insecure_channel(target)
        self._inbox = inbox_pb2_grpc.InboxServiceStub(self._upstream)
        self._streams = streams
        self.server = grpc.aio.server()
        self.port = 0
        # Calls by method, stream items by event key, and the connection (client address) each item came on.
        self.calls: Counter[str] = Counter()
        self.items: Counter[str] = Counter()
        self.item_peers: list[str] = []
        # Event keys whose stream is cut (UNAVAILABLE) once, after the item committed and before its answer.
        self.cut_after_commit: set[str] = set()
        # Event keys that end their stream for good with this code, before the item is forwarded.
        self.end_stream_with: dict[str, grpc.StatusCode] = {}
        # Codes the next streams are ended with as they open, before any item (a proxy's stream timeout).
        self.end_opening_streams_with: list[grpc.StatusCode] = []

    async def start(self) -> Relay:
        handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
            "Accept": grpc.unary_unary_rpc_method_handler(
                self._accept,
                request_deserializer=inbox_pb2.AcceptRequest.FromString,
                response_serializer=inbox_pb2.AcceptResponse.SerializeToString,
            )
        }
        if self._streams:
            handlers["AcceptStream"] = grpc.stream_stream_rpc_method_handler(
                self._accept_stream,
                request_deserializer=inbox_pb2.AcceptStreamRequest.FromString,
                response_serializer=inbox_pb2.AcceptStreamResponse.SerializeToString,
            )
        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()
        return self

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def stop(self) -> None:
        await self.server.stop(None)
        await self._upstream.close(None)

    async def _accept(
        self, request: inbox_pb2.AcceptRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> inbox_pb2.AcceptResponse:
        self.calls["Accept"] += 1
        try:
            answer = await self._forward(request, context)
        except grpc.aio.AioRpcError as exc:
            await context.abort(exc.code(), exc.details() or "")
            raise
        return answer

    async def _accept_stream(
        self, requests: AsyncIterator[inbox_pb2.AcceptStreamRequest], context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[inbox_pb2.AcceptStreamResponse]:
        self.calls["AcceptStream"] += 1
        if self.end_opening_streams_with:
            await context.abort(self.end_opening_streams_with.pop(0), "the relay ends the stream as it opens")
        async for item in requests:
            key = item.accept.event_key
            self.items[key] += 1
            self.item_peers.append(context.peer())
            if key in self.end_stream_with:
                await context.abort(self.end_stream_with[key], f"the relay ends the stream at {key}")
            try:
                answer = await self._forward(item.accept, context)
            except grpc.aio.AioRpcError as exc:
                error = inbox_pb2.ItemStatus(code=exc.code().value[0], message=exc.details() or "")
                yield inbox_pb2.AcceptStreamResponse(sequence=item.sequence, error=error)
                continue
            if key in self.cut_after_commit:
                self.cut_after_commit.discard(key)
                await context.abort(grpc.StatusCode.UNAVAILABLE, f"the relay cuts the stream after {key} committed")
            yield inbox_pb2.AcceptStreamResponse(sequence=item.sequence, accepted=answer)

    async def _forward(
        self, request: inbox_pb2.AcceptRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> inbox_pb2.AcceptResponse:
        """inboxd's own answer to `request`, with the edge's token passed on."""
        answer: inbox_pb2.AcceptResponse = await self._inbox.Accept(request, metadata=_authorization(context))
        return answer


def _authorization(context: grpc.aio.ServicerContext[Any, Any]) -> tuple[tuple[str, str], ...]:
    return tuple((str(k), str(v)) for k, v in context.invocation_metadata() or () if k == "authorization")
