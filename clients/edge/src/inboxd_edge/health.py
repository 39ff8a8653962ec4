"""`/readyz`'s question: does inboxd answer? Asked with gRPC health's Check, at most once a second.

inboxd reports SERVING once its database is reachable and migrated, and its
health service needs no token. The answer is kept for CACHE_SECONDS and
concurrent probes share one call, so however often `/readyz` is asked,
inboxd hears at most one Check a second from each edge process.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import grpc
import grpc.aio

CACHE_SECONDS = 1.0
CHECK_TIMEOUT_SECONDS = 2.0
# grpc.health.v1.HealthCheckResponse{status: SERVING}, as encoded on the wire (field 1, varint 1). The edge
# does not depend on grpcio-health-checking for one message of one field; the empty request asks about the
# whole server.
_SERVING = b"\x08\x01"


def _identity(message: bytes) -> bytes:
    return message


class Readiness:
    """Whether inboxd answers its health check with SERVING, as last seen within CACHE_SECONDS."""

    def __init__(self, channel: grpc.aio.Channel, clock: Callable[[], float] = time.monotonic) -> None:
        self._check = channel.unary_unary(
            "/grpc.health.v1.Health/Check", request_serializer=_identity, response_deserializer=_identity
        )
        self._clock = clock
        self._answer = False
        self._until = float("-inf")
        self._pending: asyncio.Task[bool] | None = None

    async def ready(self) -> bool:
        if self._clock() < self._until:
            return self._answer
        if self._pending is None:
            self._pending = asyncio.create_task(self._ask())
        pending = self._pending
        try:
            return await asyncio.shield(pending)
        finally:
            if pending.done() and self._pending is pending:
                self._pending = None

    async def _ask(self) -> bool:
        try:
            response = await self._check(b"", timeout=CHECK_TIMEOUT_SECONDS)
            answer = bool(response == _SERVING)
        except grpc.aio.AioRpcError:
            answer = False
        self._answer = answer
        self._until = self._clock() + CACHE_SECONDS
        return answer
