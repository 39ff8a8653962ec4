"""InboxAdminService: the control plane for operators (scope admin, checked by the auth interceptor)."""

from __future__ import annotations

from typing import Any

import grpc

from inboxd.api import admin_convert as convert
from inboxd.api import bulk_convert as bulk
from inboxd.api import flow_convert as flow
from inboxd.api import operator_actions_convert as acts
from inboxd.api import subscriptions_convert as subs
from inboxd.api.destinations_servicer import DestinationsServicer
from inboxd.api.identity import current_caller, current_caller_name
from inboxd.domain.operator_views import ListNarrowing
from inboxd.domain.page_tokens import encode_page_token
from inboxd.usecases.admin import ALL_STATES, Operators
from inboxd_client.v1 import admin_pb2

Context = grpc.aio.ServicerContext[Any, Any]


class AdminServicer(DestinationsServicer):
    """Methods are named after the RPCs; `api.handlers` routes to them."""

    def __init__(self, operators: Operators) -> None:
        self.operators = operators

    async def GetEvent(self, request: admin_pb2.GetEventRequest, context: Context) -> admin_pb2.GetEventResponse:
        namespace, event_key = convert.event_identity(request)
        record = await self.operators.get_event(namespace, event_key, convert.conflicts_window(request))
        return admin_pb2.GetEventResponse(
            event=convert.event_to_proto(record), conflicts_next_page_token=convert.conflicts_next_page_token(record)
        )

    async def ListEvents(self, request: admin_pb2.ListEventsRequest, context: Context) -> admin_pb2.ListEventsResponse:
        namespace = convert.optional_namespace(request)
        states, after, page_size = convert.listing(request)
        # No namespace: the namespaces the caller's grants cover (every one for a grant of "*").
        narrowing = (
            None if namespace is not None else ListNarrowing(namespace_patterns=current_caller().like_patterns())
        )
        page = await self.operators.list_events(
            namespace=namespace, states=states or ALL_STATES, after=after, page_size=page_size, narrowing=narrowing
        )
        return admin_pb2.ListEventsResponse(
            events=[convert.summary_to_proto(s) for s in page.events],
            next_page_token=encode_page_token(page.next_position) if page.next_position else "",
        )

    async def Replay(self, request: admin_pb2.ReplayRequest, context: Context) -> admin_pb2.ReplayResponse:
        namespace, event_key = convert.event_identity(request)
        reason = convert.replay_reason(request)
        record = await self.operators.replay(namespace, event_key, reason=reason, actor=current_caller_name())
        return admin_pb2.ReplayResponse(event=convert.event_to_proto(record))

    async def Stats(self, request: admin_pb2.StatsRequest, context: Context) -> admin_pb2.StatsResponse:
        stats = await self.operators.stats(convert.optional_namespace(request))
        return admin_pb2.StatsResponse(namespaces=[convert.stats_to_proto(s) for s in stats])

    async def SettleAction(
        self, request: admin_pb2.SettleActionRequest, context: Context
    ) -> admin_pb2.SettleActionResponse:
        record = await self.operators.settle_action(acts.settlement(request), actor=current_caller_name())
        return admin_pb2.SettleActionResponse(event=convert.event_to_proto(record))

    async def EndClaim(self, request: admin_pb2.EndClaimRequest, context: Context) -> admin_pb2.EndClaimResponse:
        record = await self.operators.end_claim(acts.claim_ending(request), actor=current_caller_name())
        return admin_pb2.EndClaimResponse(event=convert.event_to_proto(record))

    async def Discard(self, request: admin_pb2.DiscardRequest, context: Context) -> admin_pb2.DiscardResponse:
        record = await self.operators.discard(acts.discarding(request), actor=current_caller_name())
        return admin_pb2.DiscardResponse(event=convert.event_to_proto(record))

    async def SetFlowControl(
        self, request: admin_pb2.SetFlowControlRequest, context: Context
    ) -> admin_pb2.SetFlowControlResponse:
        changed = await self.operators.set_flow_control(flow.flow_change(request), caller=current_caller())
        return flow.set_response(changed)

    async def GetFlowControl(
        self, request: admin_pb2.GetFlowControlRequest, context: Context
    ) -> admin_pb2.GetFlowControlResponse:
        return flow.get_response(await self.operators.get_flow_control(request.namespace, caller=current_caller()))

    async def ListFlowControls(
        self, request: admin_pb2.ListFlowControlsRequest, context: Context
    ) -> admin_pb2.ListFlowControlsResponse:
        controls = await self.operators.list_flow_controls(caller=current_caller())
        return admin_pb2.ListFlowControlsResponse(controls=[flow.control_to_proto(c) for c in controls])

    async def StartBulkOperation(
        self, request: admin_pb2.StartBulkOperationRequest, context: Context
    ) -> admin_pb2.StartBulkOperationResponse:
        started = await self.operators.start_bulk_operation(bulk.bulk_request(request), caller=current_caller())
        return bulk.start_response(started)

    async def GetBulkOperation(
        self, request: admin_pb2.GetBulkOperationRequest, context: Context
    ) -> admin_pb2.GetBulkOperationResponse:
        operation = await self.operators.get_bulk_operation(request.id, caller=current_caller())
        return admin_pb2.GetBulkOperationResponse(operation=bulk.operation_to_proto(operation))

    async def ListBulkOperations(
        self, request: admin_pb2.ListBulkOperationsRequest, context: Context
    ) -> admin_pb2.ListBulkOperationsResponse:
        after, page_size = bulk.listing(request)
        page = await self.operators.list_bulk_operations(after=after, page_size=page_size, caller=current_caller())
        return bulk.list_response(page)

    async def CancelBulkOperation(
        self, request: admin_pb2.CancelBulkOperationRequest, context: Context
    ) -> admin_pb2.CancelBulkOperationResponse:
        operation = await self.operators.cancel_bulk_operation(
            request.id, reason=request.reason, caller=current_caller()
        )
        return admin_pb2.CancelBulkOperationResponse(operation=bulk.operation_to_proto(operation))

    async def CreateSubscription(
        self, request: admin_pb2.CreateSubscriptionRequest, context: Context
    ) -> admin_pb2.CreateSubscriptionResponse:
        subscription, created = await self.operators.create_subscription(
            subs.subscription_spec(request), reason=request.reason, caller=current_caller()
        )
        return admin_pb2.CreateSubscriptionResponse(
            subscription=subs.subscription_to_proto(subscription), created=created
        )

    async def GetSubscription(
        self, request: admin_pb2.GetSubscriptionRequest, context: Context
    ) -> admin_pb2.GetSubscriptionResponse:
        subscription, changes = await self.operators.get_subscription(request.name, caller=current_caller())
        return admin_pb2.GetSubscriptionResponse(
            subscription=subs.subscription_to_proto(subscription), changes=[subs.change_to_proto(c) for c in changes]
        )

    async def ListSubscriptions(
        self, request: admin_pb2.ListSubscriptionsRequest, context: Context
    ) -> admin_pb2.ListSubscriptionsResponse:
        found = await self.operators.list_subscriptions(caller=current_caller())
        return admin_pb2.ListSubscriptionsResponse(subscriptions=[subs.subscription_to_proto(s) for s in found])

    async def DeleteSubscription(
        self, request: admin_pb2.DeleteSubscriptionRequest, context: Context
    ) -> admin_pb2.DeleteSubscriptionResponse:
        removed = await self.operators.delete_subscription(request.name, reason=request.reason, caller=current_caller())
        return admin_pb2.DeleteSubscriptionResponse(subscription=subs.subscription_to_proto(removed))
