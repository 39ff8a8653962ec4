"""A scripted stand-in for inboxd on a real grpc.aio server: it answers every unary RPC, or fails as told.

For what only a misbehaving server shows: which calls the client retries,
what metadata it sends, how each status code surfaces.
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import Any

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor import ServiceDescriptor

from inboxd_client.v1 import admin_pb2, inbox_pb2

SERVICES: tuple[ServiceDescriptor, ...] = (
    inbox_pb2.DESCRIPTOR.services_by_name["InboxService"],
    admin_pb2.DESCRIPTOR.services_by_name["InboxAdminService"],
)


class FakeInbox:
    """Counts calls per RPC name and fails the next ones with the statuses queued in `failures`."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = defaultdict(int)
        self.metadata: list[dict[str, str]] = []
        self.failures: dict[str, deque[grpc.StatusCode]] = defaultdict(deque)
        self.server: grpc.aio.Server | None = None
        self.port = 0

    def fail_next(self, rpc_name: str, *codes: grpc.StatusCode) -> None:
        self.failures[rpc_name].extend(codes)

    async def start(self, credentials: grpc.ServerCredentials | None = None) -> FakeInbox:
        self.server = grpc.aio.server()
        self.server.add_generic_rpc_handlers(tuple(self._handler(service) for service in SERVICES))
        if credentials is None:
            self.port = self.server.add_insecure_port("127.0.0.1:0")
        else:
            self.port = self.server.add_secure_port("127.0.0.1:0", credentials)
        await self.server.start()
        return self

    async def stop(self) -> None:
        assert self.server is not None
        await self.server.stop(0)

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _handler(self, service: ServiceDescriptor) -> grpc.GenericRpcHandler[Any, Any]:
        handlers = {}
        for method in service.methods:
            if method.client_streaming:
                # A server without the streams (grpc answers UNIMPLEMENTED): a Worker claims with unary Claims.
                continue
            request_cls = message_factory.GetMessageClass(method.input_type)
            response_cls = message_factory.GetMessageClass(method.output_type)
            handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                self._behaviour(method.name, response_cls),
                request_deserializer=request_cls.FromString,
                response_serializer=response_cls.SerializeToString,
            )
        return grpc.method_handlers_generic_handler(service.full_name, handlers)

    def _behaviour(self, name: str, response_cls: Any) -> Any:
        async def behave(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            self.calls[name] += 1
            self.metadata.append({k: v for k, v in context.invocation_metadata() or () if isinstance(v, str)})
            if self.failures[name]:
                await context.abort(self.failures[name].popleft(), f"scripted failure of {name}")
            return response_cls()

        return behave
