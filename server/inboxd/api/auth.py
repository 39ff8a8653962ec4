"""Authorization per RPC: bearer token -> caller -> scope and namespace checks.

The token and the scope are judged on the call's metadata, before its message
is read (`api.admission`); the namespaces a call touches live in the message,
so `api.handlers` checks them in each inboxd.v1 method's wrapper, once it is
decoded. Health checking and reflection are neither (`api.open_services`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from inboxd.config.tokens import Caller, Scope
from inboxd.domain.errors import PermissionDenied

NamespacesOf = Callable[[Any], Iterable[tuple[str, str]]]


def _one(request: Any) -> Iterable[tuple[str, str]]:
    return [("namespace", request.namespace)]


def _batch(request: Any) -> Iterable[tuple[str, str]]:
    return [(f"events[{i}].namespace", e.namespace) for i, e in enumerate(request.events)]


def _claim(request: Any) -> Iterable[tuple[str, str]]:
    # An empty list means "every namespace the caller may see": the servicer narrows it.
    return [(f"namespaces[{i}]", n) for i, n in enumerate(request.namespaces)]


def _none(request: Any) -> Iterable[tuple[str, str]]:
    # Namespaces checked per item by the servicer: one item's namespace must not refuse the others.
    return []


def _optional(request: Any) -> Iterable[tuple[str, str]]:
    # Empty means "all namespaces": only a caller granted "*" may ask that.
    return [("namespace", request.namespace or "*")]


_INBOX = "/inboxd.v1.InboxService/"
_ADMIN = "/inboxd.v1.InboxAdminService/"
RULES: dict[str, tuple[Scope, NamespacesOf]] = {
    _INBOX + "Accept": (Scope.ACCEPT, _one),
    _INBOX + "AcceptBatch": (Scope.ACCEPT, _batch),
    _INBOX + "AcceptStream": (Scope.ACCEPT, _none),
    _INBOX + "Claim": (Scope.WORK, _claim),
    _INBOX + "RenewLease": (Scope.WORK, _one),
    _INBOX + "Complete": (Scope.WORK, _one),
    _INBOX + "CompleteBatch": (Scope.WORK, _none),
    _INBOX + "Fail": (Scope.WORK, _one),
    _INBOX + "Release": (Scope.WORK, _one),
    _INBOX + "RecordActionOutcome": (Scope.WORK, _one),
    # The subscription's namespaces and each call's are checked by the stream, as Claim's and the call's.
    _INBOX + "Work": (Scope.WORK, _none),
    _ADMIN + "GetEvent": (Scope.ADMIN, _one),
    _ADMIN + "Replay": (Scope.ADMIN, _one),
    _ADMIN + "SettleAction": (Scope.ADMIN, _one),
    _ADMIN + "EndClaim": (Scope.ADMIN, _one),
    _ADMIN + "Discard": (Scope.ADMIN, _one),
    # Empty: every namespace the caller may see (admin.proto); the servicer narrows to its grants.
    _ADMIN + "ListEvents": (Scope.ADMIN, lambda request: _one(request) if request.namespace else []),
    _ADMIN + "Stats": (Scope.ADMIN, _optional),
    # A rule's pattern lies within the caller's grants as a glob (glob_within_any), not as one namespace:
    # usecases/flow_control.py checks it, and narrows the listing to the rules within the grants.
    _ADMIN + "SetFlowControl": (Scope.ADMIN, _none),
    _ADMIN + "GetFlowControl": (Scope.ADMIN, _none),
    _ADMIN + "ListFlowControls": (Scope.ADMIN, _none),
    # Likewise a bulk operation's filter pattern (usecases/bulk_operations.py), and the operations shown.
    _ADMIN + "StartBulkOperation": (Scope.ADMIN, _none),
    _ADMIN + "GetBulkOperation": (Scope.ADMIN, _none),
    _ADMIN + "ListBulkOperations": (Scope.ADMIN, _none),
    _ADMIN + "CancelBulkOperation": (Scope.ADMIN, _none),
    # A subscription's pattern and its copies' `<name>/*` lie within the caller's grants as globs
    # (usecases/subscriptions.py), and a listing shows only those that do.
    _ADMIN + "CreateSubscription": (Scope.ADMIN, _none),
    _ADMIN + "GetSubscription": (Scope.ADMIN, _none),
    _ADMIN + "ListSubscriptions": (Scope.ADMIN, _none),
    _ADMIN + "DeleteSubscription": (Scope.ADMIN, _none),
    # Destinations: the use cases hold each destination's pattern to the caller's grants.
    _ADMIN + "CreateDestination": (Scope.ADMIN, _none),
    _ADMIN + "GetDestination": (Scope.ADMIN, _none),
    _ADMIN + "ListDestinations": (Scope.ADMIN, _none),
    _ADMIN + "DeleteDestination": (Scope.ADMIN, _none),
    _ADMIN + "ResumeDestination": (Scope.ADMIN, _none),
}


def bearer_token(metadata: Iterable[tuple[str, str | bytes]] | None) -> str | None:
    for key, value in metadata or ():
        if key == "authorization":
            text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
            scheme, _, token = text.partition(" ")
            return token.strip() if scheme.lower() == "bearer" else None
    return None


def _rule(method: str) -> tuple[Scope, NamespacesOf]:
    rule = RULES.get(method)
    if rule is None:
        raise PermissionDenied(f"{method} is not covered by any scope")
    return rule


def authorize_scope(caller: Caller, method: str) -> None:
    """Raises PermissionDenied unless the caller holds the method's scope (needs only the metadata)."""
    scope, _ = _rule(method)
    caller.require_scope(scope)


def authorize_namespaces(caller: Caller, method: str, request: Any) -> None:
    """Raises PermissionDenied unless the caller is granted every namespace the request touches."""
    _, namespaces_of = _rule(method)
    for field, namespace in namespaces_of(request):
        if namespace == "*" and not caller.all_namespaces:
            raise PermissionDenied(f"token {caller.name!r} must name a namespace: it is not granted all of them")
        caller.require_namespace(namespace, field)
