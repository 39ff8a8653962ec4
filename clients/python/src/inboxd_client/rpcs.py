"""The table of inboxd's RPCs: their paths, answer types, and whether a retry is safe.

The retry column is the one place that decides which calls gRPC retries by
itself when the answer is UNAVAILABLE (see `connection.service_config`). A
retry is safe only when a repeat after an unknown outcome cannot do the work
twice or lose it; the `why` of each entry says how.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from google.protobuf.message import Message

from inboxd_client.v1 import admin_pb2, inbox_pb2

INBOX_SERVICE = "inboxd.v1.InboxService"
ADMIN_SERVICE = "inboxd.v1.InboxAdminService"

R = TypeVar("R", bound=Message)


@dataclass(frozen=True)
class Rpc(Generic[R]):
    """One unary RPC: where it lives, what it answers, and whether gRPC may retry it."""

    service: str
    name: str
    response: type[R]
    retry_safe: bool
    why: str

    @property
    def path(self) -> str:
        return f"/{self.service}/{self.name}"


def serialize(message: Message) -> bytes:
    """The request serializer for every RPC (the message's own method, bound late)."""
    return message.SerializeToString()


ACCEPT = Rpc(
    INBOX_SERVICE,
    "Accept",
    inbox_pb2.AcceptResponse,
    True,
    "insert-if-absent on (namespace, event_key): a retry after a lost answer finds the committed row"
    " and answers DUPLICATE, so the event is stored once either way",
)
ACCEPT_BATCH = Rpc(
    INBOX_SERVICE,
    "AcceptBatch",
    inbox_pb2.AcceptBatchResponse,
    True,
    "one transaction of Accepts: a retry answers DUPLICATE for every event the lost attempt committed",
)
CLAIM = Rpc(
    INBOX_SERVICE,
    "Claim",
    inbox_pb2.ClaimResponse,
    False,
    "a retry after a lost answer claims again: the first claim's events are leased to nobody who knows it,"
    " and come back only when their leases expire, with an attempt spent",
)
RENEW_LEASE = Rpc(
    INBOX_SERVICE,
    "RenewLease",
    inbox_pb2.RenewLeaseResponse,
    True,
    "moves the lease's end to now + lease: doing it twice leaves the same state",
)
COMPLETE = Rpc(
    INBOX_SERVICE,
    "Complete",
    inbox_pb2.CompleteResponse,
    True,
    "idempotent for the same claim token: a repeat with the token that completed the event answers OK",
)
COMPLETE_BATCH = Rpc(
    INBOX_SERVICE,
    "CompleteBatch",
    inbox_pb2.CompleteBatchResponse,
    True,
    "each item is a Complete, idempotent for its claim token: a retry answers OK for every item the lost attempt"
    " completed, and judges the others again",
)
FAIL = Rpc(
    INBOX_SERVICE,
    "Fail",
    inbox_pb2.FailResponse,
    False,
    "counts the attempt and decides between a retry and a dead letter; a blind repeat could decide twice,"
    " and its answer (ABORTED, the claim having ended) would hide what the first one decided",
)
RELEASE = Rpc(
    INBOX_SERVICE,
    "Release",
    inbox_pb2.ReleaseResponse,
    False,
    "ends the claim: a repeat after a lost answer is ABORTED, or acts on a claim someone else made meanwhile;"
    " if the answer is lost, the lease simply expires",
)
RECORD_ACTION_OUTCOME = Rpc(
    INBOX_SERVICE,
    "RecordActionOutcome",
    inbox_pb2.RecordActionOutcomeResponse,
    True,
    "repeating an outcome that is already recorded answers OK, and INTENDED again returns the same key",
)
GET_EVENT = Rpc(ADMIN_SERVICE, "GetEvent", admin_pb2.GetEventResponse, True, "a read")
LIST_EVENTS = Rpc(ADMIN_SERVICE, "ListEvents", admin_pb2.ListEventsResponse, True, "a read")
STATS = Rpc(ADMIN_SERVICE, "Stats", admin_pb2.StatsResponse, True, "a read")
REPLAY = Rpc(
    ADMIN_SERVICE,
    "Replay",
    admin_pb2.ReplayResponse,
    False,
    "an audited transition: a repeat after a lost answer is refused (the event is PENDING already),"
    " or replays a second time if a worker finished it meanwhile",
)
# The operator's acts (issue 32): each is fenced by what the operator saw, so a
# repeat after a lost answer finds the state moved on (FAILED_PRECONDITION).
SETTLE_ACTION = Rpc(
    ADMIN_SERVICE,
    "SettleAction",
    admin_pb2.SettleActionResponse,
    False,
    "an audited act fenced by the action the operator saw: a repeat after a lost answer is refused as moved on",
)
END_CLAIM = Rpc(
    ADMIN_SERVICE,
    "EndClaim",
    admin_pb2.EndClaimResponse,
    False,
    "an audited act fenced by the claim the operator saw: a repeat after a lost answer is refused as moved on",
)
DISCARD = Rpc(
    ADMIN_SERVICE,
    "Discard",
    admin_pb2.DiscardResponse,
    False,
    "an audited act fenced by the state the operator saw: a repeat after a lost answer is refused as moved on",
)
# Flow control (issue 28): a change is an audited act (a repeat after a lost
# answer writes a second audit row, and restarts a resume's ramp); reads are reads.
SET_FLOW_CONTROL = Rpc(
    ADMIN_SERVICE,
    "SetFlowControl",
    admin_pb2.SetFlowControlResponse,
    False,
    "an audited change: a repeat after a lost answer writes a second audit row and restarts a resume's ramp",
)
GET_FLOW_CONTROL = Rpc(ADMIN_SERVICE, "GetFlowControl", admin_pb2.GetFlowControlResponse, True, "a read")
LIST_FLOW_CONTROLS = Rpc(ADMIN_SERVICE, "ListFlowControls", admin_pb2.ListFlowControlsResponse, True, "a read")
# Bulk operations (issue 30): a Start repeated after a lost answer starts a
# second operation (which then finds the events moved on and skips them);
# Cancel answers the operation as it stands when it has ended already.
START_BULK_OPERATION = Rpc(
    ADMIN_SERVICE,
    "StartBulkOperation",
    admin_pb2.StartBulkOperationResponse,
    False,
    "starts an operation: a repeat after a lost answer starts a second one",
)
GET_BULK_OPERATION = Rpc(ADMIN_SERVICE, "GetBulkOperation", admin_pb2.GetBulkOperationResponse, True, "a read")
LIST_BULK_OPERATIONS = Rpc(ADMIN_SERVICE, "ListBulkOperations", admin_pb2.ListBulkOperationsResponse, True, "a read")
CANCEL_BULK_OPERATION = Rpc(
    ADMIN_SERVICE,
    "CancelBulkOperation",
    admin_pb2.CancelBulkOperationResponse,
    True,
    "a cancel of an operation that has ended already answers it as it stands",
)
# Subscriptions (fan-out at accept): a create repeated after a lost answer
# finds its subscription standing and answers it (created = false, no second
# audit row); a delete repeated so finds nothing and answers NOT_FOUND.
CREATE_SUBSCRIPTION = Rpc(
    ADMIN_SERVICE,
    "CreateSubscription",
    admin_pb2.CreateSubscriptionResponse,
    True,
    "the same subscription asked for again answers the one that stands, unchanged and not audited again",
)
GET_SUBSCRIPTION = Rpc(ADMIN_SERVICE, "GetSubscription", admin_pb2.GetSubscriptionResponse, True, "a read")
LIST_SUBSCRIPTIONS = Rpc(ADMIN_SERVICE, "ListSubscriptions", admin_pb2.ListSubscriptionsResponse, True, "a read")
DELETE_SUBSCRIPTION = Rpc(
    ADMIN_SERVICE,
    "DeleteSubscription",
    admin_pb2.DeleteSubscriptionResponse,
    False,
    "an audited removal: a repeat after a lost answer finds nothing and answers NOT_FOUND",
)
# Destinations (push to HTTP): a Create repeated after a lost answer finds the
# name taken (FAILED_PRECONDITION) and never shows the secret again; a Delete
# repeated finds none (NOT_FOUND); a Resume repeated resumes an active one.
CREATE_DESTINATION = Rpc(
    ADMIN_SERVICE,
    "CreateDestination",
    admin_pb2.CreateDestinationResponse,
    False,
    "its answer carries the secret once: a repeat after a lost answer finds the name taken",
)
GET_DESTINATION = Rpc(ADMIN_SERVICE, "GetDestination", admin_pb2.GetDestinationResponse, True, "a read")
LIST_DESTINATIONS = Rpc(ADMIN_SERVICE, "ListDestinations", admin_pb2.ListDestinationsResponse, True, "a read")
DELETE_DESTINATION = Rpc(
    ADMIN_SERVICE,
    "DeleteDestination",
    admin_pb2.DeleteDestinationResponse,
    False,
    "an audited removal: a repeat after a lost answer finds none (NOT_FOUND)",
)
RESUME_DESTINATION = Rpc(
    ADMIN_SERVICE,
    "ResumeDestination",
    admin_pb2.ResumeDestinationResponse,
    False,
    "an audited change: a repeat after a lost answer writes a second audit row",
)

ALL_RPCS: tuple[Rpc[Any], ...] = (
    ACCEPT,
    ACCEPT_BATCH,
    CLAIM,
    RENEW_LEASE,
    COMPLETE,
    COMPLETE_BATCH,
    FAIL,
    RELEASE,
    RECORD_ACTION_OUTCOME,
    GET_EVENT,
    LIST_EVENTS,
    STATS,
    REPLAY,
    SETTLE_ACTION,
    END_CLAIM,
    DISCARD,
    SET_FLOW_CONTROL,
    GET_FLOW_CONTROL,
    LIST_FLOW_CONTROLS,
    START_BULK_OPERATION,
    GET_BULK_OPERATION,
    LIST_BULK_OPERATIONS,
    CANCEL_BULK_OPERATION,
    CREATE_SUBSCRIPTION,
    GET_SUBSCRIPTION,
    LIST_SUBSCRIPTIONS,
    DELETE_SUBSCRIPTION,
    CREATE_DESTINATION,
    GET_DESTINATION,
    LIST_DESTINATIONS,
    DELETE_DESTINATION,
    RESUME_DESTINATION,
)
