"""Protobuf <-> destinations' domain values (CreateDestination, GetDestination, ListDestinations, ...)."""

from __future__ import annotations

from datetime import timedelta

from inboxd.api.convert import duration_from_proto, duration_to_proto, instant_to_proto
from inboxd.domain.destinations import (
    DEFAULT_CONCURRENCY,
    DEFAULT_TIMEOUT,
    DeliveryAttempt,
    Destination,
    DestinationSpec,
    DestinationState,
)
from inboxd_client.v1 import admin_pb2

_STATES = {
    DestinationState.ACTIVE: admin_pb2.DESTINATION_STATE_ACTIVE,
    DestinationState.PAUSED: admin_pb2.DESTINATION_STATE_PAUSED,
}


def spec_from_proto(request: admin_pb2.CreateDestinationRequest) -> DestinationSpec:
    """The operator's request; absent durations and counts take the defaults (the domain checks the rest)."""

    def duration(field: str, default: timedelta) -> timedelta:
        return duration_from_proto(field, getattr(request, field)) if request.HasField(field) else default

    return DestinationSpec(
        name=request.name,
        url=request.url,
        namespace_pattern=request.namespace_pattern,
        secret=request.secret,
        timeout=duration("timeout", DEFAULT_TIMEOUT) or DEFAULT_TIMEOUT,
        max_attempts=request.max_attempts,
        backoff_base=duration("backoff_base", timedelta(0)),
        backoff_cap=duration("backoff_cap", timedelta(0)),
        forward_signature_metadata=request.forward_signature_metadata,
        concurrency=request.concurrency or DEFAULT_CONCURRENCY,
    )


def destination_to_proto(destination: Destination) -> admin_pb2.Destination:
    spec = destination.spec
    out = admin_pb2.Destination(
        name=spec.name,
        url=spec.url,
        namespace_pattern=spec.namespace_pattern,
        max_attempts=spec.max_attempts,
        forward_signature_metadata=spec.forward_signature_metadata,
        state=_STATES[destination.state],
        paused_reason=destination.paused_reason,
        consecutive_failures=destination.consecutive_failures,
        created_by=destination.created_by,
        concurrency=spec.concurrency,
    )
    out.timeout.CopyFrom(duration_to_proto(spec.timeout))
    if spec.backoff_base:
        out.backoff_base.CopyFrom(duration_to_proto(spec.backoff_base))
        out.backoff_cap.CopyFrom(duration_to_proto(spec.backoff_cap))
    if destination.next_try_at is not None:
        out.next_try_at.CopyFrom(instant_to_proto(destination.next_try_at))
    out.created_at.CopyFrom(instant_to_proto(destination.created_at))
    return out


def attempt_to_proto(attempt: DeliveryAttempt) -> admin_pb2.DeliveryAttempt:
    out = admin_pb2.DeliveryAttempt(
        destination=attempt.destination,
        namespace=attempt.namespace,
        event_key=attempt.event_key,
        webhook_id=attempt.webhook_id,
        attempt=attempt.attempt,
        fencing_token=attempt.fencing_token,
        status_code=attempt.status_code,
        error=attempt.error,
        response_excerpt=attempt.response_excerpt,
        outcome=attempt.outcome,
    )
    out.attempted_at.CopyFrom(instant_to_proto(attempt.attempted_at))
    out.latency.CopyFrom(duration_to_proto(attempt.latency))
    return out
