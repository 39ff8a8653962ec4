"""AsyncInboxClient: one typed coroutine per inboxd RPC, on grpc.aio.

Create it inside a running event loop (`async with AsyncInboxClient(...)`).
Every method raises an `InboxError` subclass for a non-OK status, and
`ClaimSuperseded` when a fenced call's claim is no longer current. Calls that
are safe to repeat are retried by gRPC on UNAVAILABLE (see `rpcs`).
"""

# `timeout` is each call's gRPC deadline, as grpc itself names it, not an asyncio timeout.
# ruff: noqa: ASYNC109

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import TypeVar, cast

import grpc
from google.protobuf.message import Message

from inboxd_client import builders, rpcs
from inboxd_client.accept_stream import AcceptStream
from inboxd_client.builders import DurationLike, Fenced
from inboxd_client.calls import CLAIM_TIMEOUT_MARGIN, DEFAULT_TIMEOUT, Callables, claim_timeout
from inboxd_client.claim_backoff import ClaimPacer
from inboxd_client.connection import ChannelOption, RetryPolicy, TlsConfig, call_metadata, channel_settings
from inboxd_client.errors import error_from_status
from inboxd_client.fenced_requests import FencedRequests
from inboxd_client.trace_propagation import with_trace_metadata
from inboxd_client.v1 import admin_pb2, inbox_pb2, types_pb2
from inboxd_client.work_stream import OnDraining, OnEvents, WorkStream

# Moved to `calls`, shared with the sync client; still importable from here.
__all__ = ["CLAIM_TIMEOUT_MARGIN", "DEFAULT_TIMEOUT", "AsyncInboxClient", "claim_timeout"]

R = TypeVar("R", bound=Message)


class AsyncInboxClient(FencedRequests):
    """The async client for InboxService and InboxAdminService.

    `target` is host:port. `token` is sent as `authorization: Bearer <token>`.
    `tls=True` uses gRPC's default roots; a `TlsConfig` picks the CA and the
    client certificate for mutual TLS; `False` is plaintext (loopback only).
    `retry=None` turns gRPC's retries off. `timeout` is each call's default
    deadline in seconds.
    """

    def __init__(
        self,
        target: str,
        *,
        token: str | None = None,
        tls: TlsConfig | bool = False,
        retry: RetryPolicy | None = RetryPolicy(),  # noqa: B008 - frozen, shared safely
        timeout: float = DEFAULT_TIMEOUT,
        options: Sequence[ChannelOption] = (),
    ) -> None:
        credentials, opts = channel_settings(tls, retry, options)
        if credentials is None:
            self._channel = grpc.aio.insecure_channel(target, options=opts)
        else:
            self._channel = grpc.aio.secure_channel(target, credentials, options=opts)
        self.target = target
        self.timeout = timeout
        self._metadata = call_metadata(token)
        self._callables = Callables(self._channel)

    async def close(self, grace: float | None = None) -> None:
        await self._channel.close(grace)

    async def __aenter__(self) -> AsyncInboxClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def _call(self, rpc: rpcs.Rpc[R], request: Message, timeout: float | None) -> R:
        method = self._callables.of(rpc)
        try:
            response = await method(
                request,
                timeout=self.timeout if timeout is None else timeout,
                metadata=with_trace_metadata(self._metadata),
            )
        except grpc.aio.AioRpcError as exc:
            raise error_from_status(exc.code(), exc.details(), method=rpc.name) from exc
        return cast(R, response)

    # -- InboxService --

    async def accept(
        self,
        namespace: str,
        event_key: str,
        event_type: str,
        payload: object,
        *,
        metadata: Mapping[str, str] | None = None,
        message_id: str = "",
        ordering_key: str = "",
        revision: int = 0,
        available_at: datetime | None = None,
        content_type: str = "",
        timeout: float | None = None,
    ) -> inbox_pb2.AcceptResponse:
        """Stores the event unless its (namespace, event_key) exists; answers only after commit.

        `payload` is bytes as they are, or under a JSON `content_type` (the
        default, "": `application/json`) any value json.dumps can write; under
        another type (`application/x-www-form-urlencoded`, `text/xml`...) bytes
        or a str, stored and handed back byte for byte.
        """
        request = builders.accept_request(
            namespace,
            event_key,
            event_type,
            payload,
            metadata=metadata,
            message_id=message_id,
            ordering_key=ordering_key,
            revision=revision,
            available_at=available_at,
            content_type=content_type,
        )
        return await self._call(rpcs.ACCEPT, request, timeout)

    def accept_stream(self, *, timeout: float | None = None) -> AcceptStream:
        """Many concurrent Accepts over one open stream (`async with client.accept_stream() as stream:`).

        Cheaper for the server than a unary call each; see `inboxd_client.accept_stream`.
        `timeout` is each item's deadline (the client's by default).
        """
        return AcceptStream(self._channel, self._metadata, timeout=self.timeout if timeout is None else timeout)

    def work_stream(
        self,
        subscription: inbox_pb2.WorkSubscription,
        *,
        free_slots: Callable[[], int],
        on_events: OnEvents,
        on_broken: Callable[[int], None],
        pacer: ClaimPacer,
        on_draining: OnDraining | None = None,
    ) -> WorkStream:
        """A Work stream on this client's channel, for a `Worker` (see `inboxd_client.work_stream`); `open()` it."""
        return WorkStream(
            self._channel,
            self._metadata,
            subscription,
            timeout=self.timeout,
            free_slots=free_slots,
            on_events=on_events,
            on_broken=on_broken,
            pacer=pacer,
            on_draining=on_draining,
        )

    async def accept_batch(
        self, events: Iterable[inbox_pb2.AcceptRequest], *, timeout: float | None = None
    ) -> inbox_pb2.AcceptBatchResponse:
        """Up to 500 events in one transaction; build each with `builders.accept_request`."""
        return await self._call(rpcs.ACCEPT_BATCH, builders.accept_batch_request(events), timeout)

    async def claim(
        self,
        *,
        namespaces: Iterable[str] = (),
        event_types: Iterable[str] = (),
        max_events: int = 1,
        lease: DurationLike | None = None,
        wait: DurationLike | None = None,
        worker_id: str = "",
        completions: Iterable[Fenced | inbox_pb2.CompleteRequest] = (),
        timeout: float | None = None,
    ) -> inbox_pb2.ClaimResponse:
        """Leases up to `max_events` events, long-polling up to `wait`. Never retried (see `rpcs.CLAIM`).

        `completions` (claimed events, or `CompleteRequest`s as for
        `complete_many`) are committed first, so a worker's cycle is one call;
        `claim_completion_outcomes(response, n)` reads their outcomes.
        """
        request = builders.claim_request(
            namespaces=namespaces,
            event_types=event_types,
            max_events=max_events,
            lease=lease,
            wait=wait,
            worker_id=worker_id,
            completions=completions,
        )
        return await self._call(rpcs.CLAIM, request, claim_timeout(wait, timeout))

    # -- InboxAdminService --

    async def get_event(
        self, namespace: str, event_key: str, *, timeout: float | None = None
    ) -> admin_pb2.GetEventResponse:
        return await self._call(rpcs.GET_EVENT, builders.get_event_request(namespace, event_key), timeout)

    async def list_events(
        self,
        namespace: str = "",
        *,
        state: types_pb2.EventState = types_pb2.EVENT_STATE_UNSPECIFIED,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> admin_pb2.ListEventsResponse:
        request = builders.list_events_request(namespace, state, page_size, page_token)
        return await self._call(rpcs.LIST_EVENTS, request, timeout)

    async def replay(
        self, namespace: str, event_key: str, reason: str, *, timeout: float | None = None
    ) -> admin_pb2.ReplayResponse:
        """Returns a COMPLETED or DEAD_LETTERED event to PENDING; never retried (see `rpcs.REPLAY`)."""
        return await self._call(rpcs.REPLAY, builders.replay_request(namespace, event_key, reason), timeout)

    async def stats(self, namespace: str = "", *, timeout: float | None = None) -> admin_pb2.StatsResponse:
        return await self._call(rpcs.STATS, builders.stats_request(namespace), timeout)

    # The operator's acts take their request whole: each names what the operator saw (see admin.proto).
    async def settle_action(
        self, request: admin_pb2.SettleActionRequest, *, timeout: float | None = None
    ) -> admin_pb2.SettleActionResponse:
        """Records the outcome an operator found downstream; never retried (see `rpcs.SETTLE_ACTION`)."""
        return await self._call(rpcs.SETTLE_ACTION, request, timeout)

    async def end_claim(
        self, request: admin_pb2.EndClaimRequest, *, timeout: float | None = None
    ) -> admin_pb2.EndClaimResponse:
        """Ends a PROCESSING event's claim now; never retried (see `rpcs.END_CLAIM`)."""
        return await self._call(rpcs.END_CLAIM, request, timeout)

    async def discard(
        self, request: admin_pb2.DiscardRequest, *, timeout: float | None = None
    ) -> admin_pb2.DiscardResponse:
        """Completes a PENDING or DEAD_LETTERED event as IGNORED; never retried (see `rpcs.DISCARD`)."""
        return await self._call(rpcs.DISCARD, request, timeout)

    async def set_flow_control(
        self, request: admin_pb2.SetFlowControlRequest, *, timeout: float | None = None
    ) -> admin_pb2.SetFlowControlResponse:
        """Creates, changes or removes a flow-control rule; never retried (see `rpcs.SET_FLOW_CONTROL`)."""
        return await self._call(rpcs.SET_FLOW_CONTROL, request, timeout)

    async def get_flow_control(
        self, namespace: str, *, timeout: float | None = None
    ) -> admin_pb2.GetFlowControlResponse:
        """The rule that governs `namespace`, with live figures and its recent changes."""
        return await self._call(rpcs.GET_FLOW_CONTROL, admin_pb2.GetFlowControlRequest(namespace=namespace), timeout)

    async def list_flow_controls(self, *, timeout: float | None = None) -> admin_pb2.ListFlowControlsResponse:
        """Every flow-control rule within the caller's grants, with live figures."""
        return await self._call(rpcs.LIST_FLOW_CONTROLS, admin_pb2.ListFlowControlsRequest(), timeout)

    async def start_bulk_operation(
        self, request: admin_pb2.StartBulkOperationRequest, *, timeout: float | None = None
    ) -> admin_pb2.StartBulkOperationResponse:
        """Starts a bulk replay or ignore; never retried (see `rpcs.START_BULK_OPERATION`)."""
        return await self._call(rpcs.START_BULK_OPERATION, request, timeout)

    async def get_bulk_operation(
        self, operation_id: str, *, timeout: float | None = None
    ) -> admin_pb2.GetBulkOperationResponse:
        request = admin_pb2.GetBulkOperationRequest(id=operation_id)
        return await self._call(rpcs.GET_BULK_OPERATION, request, timeout)

    async def list_bulk_operations(
        self, page_token: str = "", *, page_size: int = 0, timeout: float | None = None
    ) -> admin_pb2.ListBulkOperationsResponse:
        request = admin_pb2.ListBulkOperationsRequest(page_size=page_size, page_token=page_token)
        return await self._call(rpcs.LIST_BULK_OPERATIONS, request, timeout)

    async def cancel_bulk_operation(
        self, operation_id: str, reason: str, *, timeout: float | None = None
    ) -> admin_pb2.CancelBulkOperationResponse:
        request = admin_pb2.CancelBulkOperationRequest(id=operation_id, reason=reason)
        return await self._call(rpcs.CANCEL_BULK_OPERATION, request, timeout)

    async def create_subscription(
        self, request: admin_pb2.CreateSubscriptionRequest, *, timeout: float | None = None
    ) -> admin_pb2.CreateSubscriptionResponse:
        """Creates a subscription (fan-out at accept); a retried create answers the one that stands."""
        return await self._call(rpcs.CREATE_SUBSCRIPTION, request, timeout)

    async def get_subscription(self, name: str, *, timeout: float | None = None) -> admin_pb2.GetSubscriptionResponse:
        return await self._call(rpcs.GET_SUBSCRIPTION, admin_pb2.GetSubscriptionRequest(name=name), timeout)

    async def list_subscriptions(self, *, timeout: float | None = None) -> admin_pb2.ListSubscriptionsResponse:
        return await self._call(rpcs.LIST_SUBSCRIPTIONS, admin_pb2.ListSubscriptionsRequest(), timeout)

    async def delete_subscription(
        self, name: str, reason: str, *, timeout: float | None = None
    ) -> admin_pb2.DeleteSubscriptionResponse:
        """Deletes a subscription, audited (its copies stay); never retried (see `rpcs.DELETE_SUBSCRIPTION`)."""
        request = admin_pb2.DeleteSubscriptionRequest(name=name, reason=reason)
        return await self._call(rpcs.DELETE_SUBSCRIPTION, request, timeout)

    # Destinations (push to HTTP).

    async def create_destination(
        self, request: admin_pb2.CreateDestinationRequest, *, timeout: float | None = None
    ) -> admin_pb2.CreateDestinationResponse:
        """Creates a destination; the answer carries its secret, once. Never retried."""
        return await self._call(rpcs.CREATE_DESTINATION, request, timeout)

    async def get_destination(self, name: str, *, timeout: float | None = None) -> admin_pb2.GetDestinationResponse:
        return await self._call(rpcs.GET_DESTINATION, admin_pb2.GetDestinationRequest(name=name), timeout)

    async def list_destinations(self, *, timeout: float | None = None) -> admin_pb2.ListDestinationsResponse:
        return await self._call(rpcs.LIST_DESTINATIONS, admin_pb2.ListDestinationsRequest(), timeout)

    async def delete_destination(
        self, name: str, reason: str, *, timeout: float | None = None
    ) -> admin_pb2.DeleteDestinationResponse:
        request = admin_pb2.DeleteDestinationRequest(name=name, reason=reason)
        return await self._call(rpcs.DELETE_DESTINATION, request, timeout)

    async def resume_destination(
        self, name: str, reason: str, *, timeout: float | None = None
    ) -> admin_pb2.ResumeDestinationResponse:
        request = admin_pb2.ResumeDestinationRequest(name=name, reason=reason)
        return await self._call(rpcs.RESUME_DESTINATION, request, timeout)
