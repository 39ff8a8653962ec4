"""The auth interceptor: bearer token -> caller -> scope and namespace checks, per RPC.

It wraps each inboxd.v1 method handler so it can see the decoded request
(the namespaces a call touches live in the message). Health checking and
reflection pass untouched.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import grpc

from inboxd.api.identity import set_caller
from inboxd.api.rpc_timing import ObserveRpc
from inboxd.api.status import status_for
from inboxd.auth import ANONYMOUS, Caller, Scope, TokenRegistry
from inboxd.errors import InboxError, PermissionDenied

NamespacesOf = Callable[[Any], Iterable[tuple[str, str]]]


def _one(request: Any) -> Iterable[tuple[str, str]]:
    return [("namespace", request.namespace)]


def _batch(request: Any) -> Iterable[tuple[str, str]]:
    return [(f"events[{i}].namespace", e.namespace) for i, e in enumerate(request.events)]


def _claim(request: Any) -> Iterable[tuple[str, str]]:
    # An empty list means "every namespace the caller may see": the servicer narrows it.
    return [(f"namespaces[{i}]", n) for i, n in enumerate(request.namespaces)]


def _optional(request: Any) -> Iterable[tuple[str, str]]:
    # Empty means "all namespaces": only a caller granted "*" may ask that.
    return [("namespace", request.namespace or "*")]


_INBOX = "/inboxd.v1.InboxService/"
_ADMIN = "/inboxd.v1.InboxAdminService/"
RULES: dict[str, tuple[Scope, NamespacesOf]] = {
    _INBOX + "Accept": (Scope.ACCEPT, _one),
    _INBOX + "AcceptBatch": (Scope.ACCEPT, _batch),
    _INBOX + "Claim": (Scope.WORK, _claim),
    _INBOX + "RenewLease": (Scope.WORK, _one),
    _INBOX + "Complete": (Scope.WORK, _one),
    _INBOX + "Fail": (Scope.WORK, _one),
    _INBOX + "Release": (Scope.WORK, _one),
    _INBOX + "RecordActionOutcome": (Scope.WORK, _one),
    _ADMIN + "GetEvent": (Scope.ADMIN, _one),
    _ADMIN + "Replay": (Scope.ADMIN, _one),
    _ADMIN + "ListEvents": (Scope.ADMIN, _optional),
    _ADMIN + "Stats": (Scope.ADMIN, _optional),
}


def bearer_token(metadata: Iterable[tuple[str, str | bytes]] | None) -> str | None:
    for key, value in metadata or ():
        if key == "authorization":
            text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
            scheme, _, token = text.partition(" ")
            return token.strip() if scheme.lower() == "bearer" else None
    return None


def authorize(caller: Caller, method: str, request: Any) -> None:
    """Raises PermissionDenied unless the caller holds the scope and every namespace touched."""
    rule = RULES.get(method)
    if rule is None:
        raise PermissionDenied(f"{method} is not covered by any scope")
    scope, namespaces_of = rule
    caller.require_scope(scope)
    for field, namespace in namespaces_of(request):
        if namespace == "*" and not caller.all_namespaces:
            raise PermissionDenied(f"token {caller.name!r} must name a namespace: it is not granted all of them")
        caller.require_namespace(namespace, field)


class AuthInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
    """Authenticates every inboxd.v1 call; without a registry every caller is ANONYMOUS (loopback only)."""

    def __init__(self, registry: TokenRegistry | None, observe: ObserveRpc | None = None) -> None:
        self.registry = registry
        # Refusals never reach the handler's timing, so they are reported from here.
        self.observe = observe

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any]]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any]:
        handler = await continuation(details)
        method = details.method
        if handler is None or handler.unary_unary is None or not method.startswith("/inboxd.v1."):
            return handler
        behaviour = handler.unary_unary
        registry = self.registry
        metadata = details.invocation_metadata

        async def guarded(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            try:
                caller = ANONYMOUS if registry is None else registry.authenticate(bearer_token(metadata))
                if registry is not None and not _malformed(request):
                    authorize(caller, method, request)
            except InboxError as exc:
                if self.observe is not None:
                    self.observe(method.rsplit("/", 1)[-1], status_for(exc), 0.0)
                await context.abort(status_for(exc), str(exc))
            remaining = context.time_remaining()
            if remaining is not None and remaining <= 0:
                await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "the deadline passed before the call began")
            set_caller(caller)
            return await behaviour(request, context)  # type: ignore[arg-type]  # grpc-stubs know only sync

        return grpc.unary_unary_rpc_method_handler(
            guarded,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


def _malformed(request: Any) -> bool:
    # A request that did not decode carries no namespaces; the handler answers INVALID_ARGUMENT.
    from inboxd.api.handlers import MalformedRequest

    return isinstance(request, MalformedRequest)
