"""One inboxd call as both clients make it, all but the wait: its deadline and its callable on the channel.

`AsyncInboxClient` and `InboxClient` differ only in how they wait for an
answer (an `await` on a grpc.aio channel, a blocking call on a grpc one).
What a call needs before that wait is written here once. The rest of what
they share lives beside it: the request comes from `builders`, the channel's
settings and the token from `connection`, a status's exception from `errors`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from google.protobuf.message import Message

from inboxd_client import builders
from inboxd_client.builders import DurationLike
from inboxd_client.rpcs import Rpc, serialize

DEFAULT_TIMEOUT = 30.0
# A long-polling Claim may take `wait`; the server answers (empty-handed) before this much more.
CLAIM_TIMEOUT_MARGIN = 10.0


def claim_timeout(wait: DurationLike | None, timeout: float | None) -> float:
    """A Claim's deadline: the caller's, else long enough for its long-poll to end with an answer."""
    if timeout is not None:
        return timeout
    return (builders.to_timedelta(wait).total_seconds() if wait is not None else 0.0) + CLAIM_TIMEOUT_MARGIN


class UnaryChannel(Protocol):
    """What the clients ask of a channel, grpc's or grpc.aio's alike: a callable for one method path."""

    def unary_unary(
        self,
        method: str,
        request_serializer: Callable[[Message], bytes],
        response_deserializer: Callable[[bytes], Any],
    ) -> Any: ...


class Callables:
    """A channel's callable for each RPC, made on first use and kept for the channel's life."""

    def __init__(self, channel: UnaryChannel) -> None:
        self._channel = channel
        self._by_path: dict[str, Any] = {}

    def of(self, rpc: Rpc[Any]) -> Any:
        method = self._by_path.get(rpc.path)
        if method is None:
            method = self._channel.unary_unary(
                rpc.path, request_serializer=serialize, response_deserializer=rpc.response.FromString
            )
            self._by_path[rpc.path] = method
        return method
