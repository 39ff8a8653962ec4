"""Request messages from plain Python values, one builder per RPC, shared by the async and the sync client.

Durations take a `timedelta` or seconds as a float; instants take an aware
`datetime`; payloads take bytes as they are, and under a JSON content type (the
default) any value `json.dumps` can write (see `payloads.payload_bytes`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Protocol

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from inboxd_client.payloads import payload_bytes
from inboxd_client.v1 import admin_pb2, inbox_pb2, types_pb2

__all__ = ["payload_bytes"]  # re-exported: it lived here before payloads.py

DurationLike = timedelta | float


class Fenced(Protocol):
    """What every fenced call needs: a `ClaimedEvent` has it, so does anything with these three fields."""

    @property
    def namespace(self) -> str: ...
    @property
    def event_key(self) -> str: ...
    @property
    def claim_token(self) -> str: ...


def to_timedelta(value: DurationLike) -> timedelta:
    return value if isinstance(value, timedelta) else timedelta(seconds=value)


def duration(value: DurationLike) -> Duration:
    out = Duration()
    out.FromTimedelta(to_timedelta(value))
    return out


def timestamp(value: datetime) -> Timestamp:
    if value.tzinfo is None:
        raise ValueError("instants must be timezone-aware datetimes; a naive one has no single meaning")
    out = Timestamp()
    out.FromDatetime(value)
    return out


def accept_request(
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
) -> inbox_pb2.AcceptRequest:
    """An AcceptRequest; `content_type` "" is the server's default, `application/json`."""
    request = inbox_pb2.AcceptRequest(
        namespace=namespace,
        event_key=event_key,
        event_type=event_type,
        payload=payload_bytes(payload, content_type),
        metadata=dict(metadata or {}),
        message_id=message_id,
        ordering_key=ordering_key,
        revision=revision,
        content_type=content_type,
    )
    if available_at is not None:
        request.available_at.CopyFrom(timestamp(available_at))
    return request


def accept_batch_request(events: Iterable[inbox_pb2.AcceptRequest]) -> inbox_pb2.AcceptBatchRequest:
    return inbox_pb2.AcceptBatchRequest(events=list(events))


def claim_request(
    *,
    namespaces: Iterable[str] = (),
    event_types: Iterable[str] = (),
    max_events: int = 1,
    lease: DurationLike | None = None,
    wait: DurationLike | None = None,
    worker_id: str = "",
    completions: Iterable[Fenced | inbox_pb2.CompleteRequest] = (),
) -> inbox_pb2.ClaimRequest:
    request = inbox_pb2.ClaimRequest(
        namespaces=list(namespaces),
        event_types=list(event_types),
        max_events=max_events,
        worker_id=worker_id,
        completions=completion_items(completions),
    )
    if lease is not None:
        request.lease.CopyFrom(duration(lease))
    if wait is not None:
        request.wait.CopyFrom(duration(wait))
    return request


def renew_lease_request(event: Fenced, lease: DurationLike | None) -> inbox_pb2.RenewLeaseRequest:
    request = inbox_pb2.RenewLeaseRequest(
        namespace=event.namespace, event_key=event.event_key, claim_token=event.claim_token
    )
    if lease is not None:
        request.lease.CopyFrom(duration(lease))
    return request


def complete_request(event: Fenced, disposition: types_pb2.Disposition, reason: str) -> inbox_pb2.CompleteRequest:
    return inbox_pb2.CompleteRequest(
        namespace=event.namespace,
        event_key=event.event_key,
        claim_token=event.claim_token,
        disposition=disposition,
        reason=reason,
    )


def complete_batch_request(
    items: Iterable[Fenced | inbox_pb2.CompleteRequest],
) -> inbox_pb2.CompleteBatchRequest:
    return inbox_pb2.CompleteBatchRequest(completions=completion_items(items))


def completion_items(items: Iterable[Fenced | inbox_pb2.CompleteRequest]) -> list[inbox_pb2.CompleteRequest]:
    """A CompleteRequest passes as it is; anything else fenced completes as APPLIED."""
    return [
        item
        if isinstance(item, inbox_pb2.CompleteRequest)
        else complete_request(item, types_pb2.DISPOSITION_APPLIED, "")
        for item in items
    ]


def fail_request(
    event: Fenced, error: str, *, permanent: bool, retry_after: DurationLike | None
) -> inbox_pb2.FailRequest:
    request = inbox_pb2.FailRequest(
        namespace=event.namespace,
        event_key=event.event_key,
        claim_token=event.claim_token,
        error=error,
        permanent=permanent,
    )
    if retry_after is not None:
        request.retry_after.CopyFrom(duration(retry_after))
    return request


def release_request(event: Fenced) -> inbox_pb2.ReleaseRequest:
    return inbox_pb2.ReleaseRequest(namespace=event.namespace, event_key=event.event_key, claim_token=event.claim_token)


def record_action_outcome_request(
    event: Fenced, action: str, state: types_pb2.ActionState, external_ref: str, detail: str
) -> inbox_pb2.RecordActionOutcomeRequest:
    return inbox_pb2.RecordActionOutcomeRequest(
        namespace=event.namespace,
        event_key=event.event_key,
        claim_token=event.claim_token,
        action=action,
        state=state,
        external_ref=external_ref,
        detail=detail,
    )


def get_event_request(namespace: str, event_key: str) -> admin_pb2.GetEventRequest:
    return admin_pb2.GetEventRequest(namespace=namespace, event_key=event_key)


def list_events_request(
    namespace: str, state: types_pb2.EventState, page_size: int, page_token: str
) -> admin_pb2.ListEventsRequest:
    return admin_pb2.ListEventsRequest(namespace=namespace, state=state, page_size=page_size, page_token=page_token)


def replay_request(namespace: str, event_key: str, reason: str) -> admin_pb2.ReplayRequest:
    return admin_pb2.ReplayRequest(namespace=namespace, event_key=event_key, reason=reason)


def stats_request(namespace: str) -> admin_pb2.StatsRequest:
    return admin_pb2.StatsRequest(namespace=namespace)
