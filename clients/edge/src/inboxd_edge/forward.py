"""Accept on inboxd, and the HTTP answer the provider gets for inboxd's outcome.

The rule that matters: 2xx only after Accept answered OK. ACCEPTED, DUPLICATE
and CONFLICT all mean "durably accepted", so all three are 2xx. Anything that
may not have been committed (UNAVAILABLE, a passed deadline) is 503, so the
provider retries and the retry finds the row or creates it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import grpc
import grpc.aio

from inboxd_client.v1 import inbox_pb2
from inboxd_edge.keys import ResolvedEvent

_OUTCOMES: Mapping[int, str] = {
    inbox_pb2.ACCEPT_OUTCOME_ACCEPTED: "accepted",
    inbox_pb2.ACCEPT_OUTCOME_DUPLICATE: "duplicate",
    inbox_pb2.ACCEPT_OUTCOME_CONFLICT: "conflict",
}
# Nothing durable can be assumed: the provider must retry.
_RETRYABLE = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.CANCELLED,
}

AcceptCall = grpc.aio.UnaryUnaryMultiCallable[inbox_pb2.AcceptRequest, inbox_pb2.AcceptResponse]


@dataclass(frozen=True)
class Answer:
    """The HTTP status for the provider, and a one-word outcome for the response body and the log."""

    status: int
    outcome: str


def answer_for_error(code: grpc.StatusCode) -> Answer:
    """The answer when Accept failed with `code`."""
    if code in _RETRYABLE:
        return Answer(503, code.name.lower())
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        # inboxd refused the event itself (say, JSON jsonb cannot hold): a retry cannot help.
        return Answer(400, "rejected")
    # UNAUTHENTICATED, PERMISSION_DENIED, INTERNAL...: the edge or inboxd is misconfigured.
    # 500 keeps the provider retrying until an operator fixes it.
    return Answer(500, code.name.lower())


class Forwarder:
    """Calls Accept with a deadline and, when configured, a bearer token."""

    def __init__(self, channel: grpc.aio.Channel, *, deadline: float, token: str | None = None) -> None:
        self._accept: AcceptCall = channel.unary_unary(
            "/inboxd.v1.InboxService/Accept",
            request_serializer=inbox_pb2.AcceptRequest.SerializeToString,
            response_deserializer=inbox_pb2.AcceptResponse.FromString,
        )
        self._deadline = deadline
        self._metadata = (("authorization", f"Bearer {token}"),) if token else None

    async def accept(self, event: ResolvedEvent) -> Answer:
        """Accepts the event and says what to answer the provider."""
        request = inbox_pb2.AcceptRequest(
            namespace=event.namespace,
            event_key=event.event_key,
            event_type=event.event_type,
            payload=event.payload,
            metadata=dict(event.metadata),
            message_id=event.message_id,
            ordering_key=event.ordering_key,
        )
        try:
            response = await self._accept(request, timeout=self._deadline, metadata=self._metadata)
        except grpc.aio.AioRpcError as exc:
            return answer_for_error(exc.code())
        outcome = _OUTCOMES.get(response.outcome)
        if outcome is None:
            # An OK without a known outcome proves nothing was committed: never 2xx on it.
            return Answer(500, "unknown_outcome")
        return Answer(200, outcome)
