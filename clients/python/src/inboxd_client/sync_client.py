"""InboxClient: the blocking twin of AsyncInboxClient, on a plain grpc channel.

Same methods, same arguments, same exceptions, same retry policy; see
`aio_client.AsyncInboxClient` for what each call does. All but the wait is
written once for both: `builders` makes the requests, `calls` the deadlines
and the callables, `connection` the channel's settings and the token,
`errors` the exceptions. What the two files repeat is each method's
signature, and the wait itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import TypeVar, cast

import grpc
from google.protobuf.message import Message

from inboxd_client import builders, rpcs
from inboxd_client.builders import DurationLike, Fenced
from inboxd_client.calls import DEFAULT_TIMEOUT, Callables, claim_timeout
from inboxd_client.connection import ChannelOption, RetryPolicy, TlsConfig, call_metadata, channel_settings
from inboxd_client.errors import InboxError, complete_batch_outcomes, error_from_status
from inboxd_client.trace_propagation import with_trace_metadata
from inboxd_client.v1 import admin_pb2, inbox_pb2, types_pb2

R = TypeVar("R", bound=Message)


class InboxClient:
    """The blocking client for InboxService and InboxAdminService; options as in AsyncInboxClient."""

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
            self._channel = grpc.insecure_channel(target, options=opts)
        else:
            self._channel = grpc.secure_channel(target, credentials, options=opts)
        self.target = target
        self.timeout = timeout
        self._metadata = call_metadata(token)
        self._callables = Callables(self._channel)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> InboxClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _call(self, rpc: rpcs.Rpc[R], request: Message, timeout: float | None) -> R:
        method = self._callables.of(rpc)
        try:
            metadata = with_trace_metadata(self._metadata)
            response = method(request, timeout=self.timeout if timeout is None else timeout, metadata=metadata)
        except grpc.RpcError as exc:
            raise error_from_status(exc.code(), exc.details(), method=rpc.name) from exc
        return cast(R, response)

    # -- InboxService --

    def accept(
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
        return self._call(rpcs.ACCEPT, request, timeout)

    def accept_batch(
        self, events: Iterable[inbox_pb2.AcceptRequest], *, timeout: float | None = None
    ) -> inbox_pb2.AcceptBatchResponse:
        return self._call(rpcs.ACCEPT_BATCH, builders.accept_batch_request(events), timeout)

    def claim(
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
        request = builders.claim_request(
            namespaces=namespaces,
            event_types=event_types,
            max_events=max_events,
            lease=lease,
            wait=wait,
            worker_id=worker_id,
            completions=completions,
        )
        return self._call(rpcs.CLAIM, request, claim_timeout(wait, timeout))

    def renew_lease(
        self, event: Fenced, *, lease: DurationLike | None = None, timeout: float | None = None
    ) -> inbox_pb2.RenewLeaseResponse:
        return self._call(rpcs.RENEW_LEASE, builders.renew_lease_request(event, lease), timeout)

    def complete(
        self,
        event: Fenced,
        *,
        disposition: types_pb2.Disposition = types_pb2.DISPOSITION_APPLIED,
        reason: str = "",
        timeout: float | None = None,
    ) -> inbox_pb2.CompleteResponse:
        return self._call(rpcs.COMPLETE, builders.complete_request(event, disposition, reason), timeout)

    def complete_many(
        self, items: Iterable[Fenced | inbox_pb2.CompleteRequest], *, timeout: float | None = None
    ) -> list[InboxError | None]:
        """CompleteBatch: per item None (completed) or its error, returned; see AsyncInboxClient.complete_many."""
        request = builders.complete_batch_request(items)
        response = self._call(rpcs.COMPLETE_BATCH, request, timeout)
        return complete_batch_outcomes(response, len(request.completions))

    def fail(
        self,
        event: Fenced,
        error: str,
        *,
        permanent: bool = False,
        retry_after: DurationLike | None = None,
        timeout: float | None = None,
    ) -> inbox_pb2.FailResponse:
        request = builders.fail_request(event, error, permanent=permanent, retry_after=retry_after)
        return self._call(rpcs.FAIL, request, timeout)

    def release(self, event: Fenced, *, timeout: float | None = None) -> inbox_pb2.ReleaseResponse:
        return self._call(rpcs.RELEASE, builders.release_request(event), timeout)

    def record_action_outcome(
        self,
        event: Fenced,
        action: str,
        state: types_pb2.ActionState,
        *,
        external_ref: str = "",
        detail: str = "",
        timeout: float | None = None,
    ) -> inbox_pb2.RecordActionOutcomeResponse:
        request = builders.record_action_outcome_request(event, action, state, external_ref, detail)
        return self._call(rpcs.RECORD_ACTION_OUTCOME, request, timeout)

    # -- InboxAdminService --

    def get_event(self, namespace: str, event_key: str, *, timeout: float | None = None) -> admin_pb2.GetEventResponse:
        return self._call(rpcs.GET_EVENT, builders.get_event_request(namespace, event_key), timeout)

    def list_events(
        self,
        namespace: str = "",
        *,
        state: types_pb2.EventState = types_pb2.EVENT_STATE_UNSPECIFIED,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> admin_pb2.ListEventsResponse:
        request = builders.list_events_request(namespace, state, page_size, page_token)
        return self._call(rpcs.LIST_EVENTS, request, timeout)

    def replay(
        self, namespace: str, event_key: str, reason: str, *, timeout: float | None = None
    ) -> admin_pb2.ReplayResponse:
        return self._call(rpcs.REPLAY, builders.replay_request(namespace, event_key, reason), timeout)

    def stats(self, namespace: str = "", *, timeout: float | None = None) -> admin_pb2.StatsResponse:
        return self._call(rpcs.STATS, builders.stats_request(namespace), timeout)

    def settle_action(
        self, request: admin_pb2.SettleActionRequest, *, timeout: float | None = None
    ) -> admin_pb2.SettleActionResponse:
        return self._call(rpcs.SETTLE_ACTION, request, timeout)

    def end_claim(
        self, request: admin_pb2.EndClaimRequest, *, timeout: float | None = None
    ) -> admin_pb2.EndClaimResponse:
        return self._call(rpcs.END_CLAIM, request, timeout)

    def discard(self, request: admin_pb2.DiscardRequest, *, timeout: float | None = None) -> admin_pb2.DiscardResponse:
        return self._call(rpcs.DISCARD, request, timeout)

    def set_flow_control(
        self, request: admin_pb2.SetFlowControlRequest, *, timeout: float | None = None
    ) -> admin_pb2.SetFlowControlResponse:
        return self._call(rpcs.SET_FLOW_CONTROL, request, timeout)

    def get_flow_control(self, namespace: str, *, timeout: float | None = None) -> admin_pb2.GetFlowControlResponse:
        return self._call(rpcs.GET_FLOW_CONTROL, admin_pb2.GetFlowControlRequest(namespace=namespace), timeout)

    def list_flow_controls(self, *, timeout: float | None = None) -> admin_pb2.ListFlowControlsResponse:
        return self._call(rpcs.LIST_FLOW_CONTROLS, admin_pb2.ListFlowControlsRequest(), timeout)

    def start_bulk_operation(
        self, request: admin_pb2.StartBulkOperationRequest, *, timeout: float | None = None
    ) -> admin_pb2.StartBulkOperationResponse:
        return self._call(rpcs.START_BULK_OPERATION, request, timeout)

    def get_bulk_operation(
        self, operation_id: str, *, timeout: float | None = None
    ) -> admin_pb2.GetBulkOperationResponse:
        return self._call(rpcs.GET_BULK_OPERATION, admin_pb2.GetBulkOperationRequest(id=operation_id), timeout)

    def list_bulk_operations(
        self, page_token: str = "", *, page_size: int = 0, timeout: float | None = None
    ) -> admin_pb2.ListBulkOperationsResponse:
        request = admin_pb2.ListBulkOperationsRequest(page_size=page_size, page_token=page_token)
        return self._call(rpcs.LIST_BULK_OPERATIONS, request, timeout)

    def cancel_bulk_operation(
        self, operation_id: str, reason: str, *, timeout: float | None = None
    ) -> admin_pb2.CancelBulkOperationResponse:
        request = admin_pb2.CancelBulkOperationRequest(id=operation_id, reason=reason)
        return self._call(rpcs.CANCEL_BULK_OPERATION, request, timeout)

    def create_subscription(
        self, request: admin_pb2.CreateSubscriptionRequest, *, timeout: float | None = None
    ) -> admin_pb2.CreateSubscriptionResponse:
        return self._call(rpcs.CREATE_SUBSCRIPTION, request, timeout)

    def get_subscription(self, name: str, *, timeout: float | None = None) -> admin_pb2.GetSubscriptionResponse:
        return self._call(rpcs.GET_SUBSCRIPTION, admin_pb2.GetSubscriptionRequest(name=name), timeout)

    def list_subscriptions(self, *, timeout: float | None = None) -> admin_pb2.ListSubscriptionsResponse:
        return self._call(rpcs.LIST_SUBSCRIPTIONS, admin_pb2.ListSubscriptionsRequest(), timeout)

    def delete_subscription(
        self, name: str, reason: str, *, timeout: float | None = None
    ) -> admin_pb2.DeleteSubscriptionResponse:
        request = admin_pb2.DeleteSubscriptionRequest(name=name, reason=reason)
        return self._call(rpcs.DELETE_SUBSCRIPTION, request, timeout)

    # Destinations (push to HTTP).

    def create_destination(
        self, request: admin_pb2.CreateDestinationRequest, *, timeout: float | None = None
    ) -> admin_pb2.CreateDestinationResponse:
        """Creates a destination; the answer carries its secret, once. Never retried."""
        return self._call(rpcs.CREATE_DESTINATION, request, timeout)

    def get_destination(self, name: str, *, timeout: float | None = None) -> admin_pb2.GetDestinationResponse:
        return self._call(rpcs.GET_DESTINATION, admin_pb2.GetDestinationRequest(name=name), timeout)

    def list_destinations(self, *, timeout: float | None = None) -> admin_pb2.ListDestinationsResponse:
        return self._call(rpcs.LIST_DESTINATIONS, admin_pb2.ListDestinationsRequest(), timeout)

    def delete_destination(
        self, name: str, reason: str, *, timeout: float | None = None
    ) -> admin_pb2.DeleteDestinationResponse:
        request = admin_pb2.DeleteDestinationRequest(name=name, reason=reason)
        return self._call(rpcs.DELETE_DESTINATION, request, timeout)

    def resume_destination(
        self, name: str, reason: str, *, timeout: float | None = None
    ) -> admin_pb2.ResumeDestinationResponse:
        request = admin_pb2.ResumeDestinationRequest(name=name, reason=reason)
        return self._call(rpcs.RESUME_DESTINATION, request, timeout)
