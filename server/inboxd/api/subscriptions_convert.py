"""Protobuf <-> subscriptions' domain values: Create, Get, List and DeleteSubscription."""

from __future__ import annotations

from inboxd.api.convert import instant_to_proto
from inboxd.domain.subscriptions import Subscription, SubscriptionChange, SubscriptionSpec
from inboxd_client.v1 import admin_pb2


def subscription_spec(request: admin_pb2.CreateSubscriptionRequest) -> SubscriptionSpec:
    """The subscription asked for; InvalidArgument names the first field it cannot take."""
    return SubscriptionSpec(
        name=request.name, namespace_pattern=request.namespace_pattern, event_types=tuple(request.event_types)
    )


def subscription_to_proto(subscription: Subscription) -> admin_pb2.Subscription:
    return admin_pb2.Subscription(
        name=subscription.name,
        namespace_pattern=subscription.namespace_pattern,
        event_types=list(subscription.event_types),
        created_at=instant_to_proto(subscription.created_at),
        created_by=subscription.created_by,
    )


def change_to_proto(change: SubscriptionChange) -> admin_pb2.SubscriptionChange:
    return admin_pb2.SubscriptionChange(
        name=change.name,
        actor=change.actor,
        reason=change.reason,
        changed_at=instant_to_proto(change.changed_at),
        before=change.before,
        after=change.after,
    )
