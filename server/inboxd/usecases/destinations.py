"""Destinations for operators, and for the runner that delivers to them (background/destinations.py).

A base of `usecases.admin.Operators`, as `FlowControls` is. An operator's
call is the caller's within its grants: a destination's namespace pattern
must lie within the token's namespaces, and a listing shows only the
destinations whose pattern does. Each change is written with its audit row
in one statement. The runner's side (the breaker's transitions, each POST's
attempt) is here too, so that the background job reaches the store only
through the use cases.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from inboxd.config.tokens import Caller
from inboxd.domain.destinations import DeliveryAttempt, Destination, DestinationSpec, DestinationState, checked_spec
from inboxd.domain.errors import InvalidArgument, NotFound, PermissionDenied, TransitionNotAllowed
from inboxd.domain.namespace_patterns import glob_within_any
from inboxd.store import destinations as store
from inboxd.store.database import Connection

if TYPE_CHECKING:
    from inboxd.usecases.inbox import Inbox


def _require_within_grants(caller: Caller, pattern: str) -> None:
    if not glob_within_any(pattern, caller.namespaces):
        raise PermissionDenied(
            f"token {caller.name!r} is not granted namespace_pattern {pattern!r}: a destination must serve only"
            f" the token's namespaces ({', '.join(caller.namespaces) or 'none'})"
        )


def _require_reason(reason: str) -> None:
    if not reason.strip():
        raise InvalidArgument("reason", "is required: it is written to the audit row")


class Destinations:
    """The destinations' admin RPCs (Create, Get, List, Delete, Resume), and the runner's calls."""

    inbox: Inbox

    async def create_destination(self, spec: DestinationSpec, *, reason: str, caller: Caller) -> Destination:
        """Creates a destination (its secret generated when the spec has none), audited; answers it, secret included."""
        _require_reason(reason)
        spec = checked_spec(spec, allow_http=self.inbox.settings.destinations_allow_http)
        _require_within_grants(caller, spec.namespace_pattern)
        now = self.inbox.clock()

        async def work(conn: Connection) -> Destination:
            if not await store.create(conn, spec, actor=caller.name, reason=reason, now=now):
                raise TransitionNotAllowed(f"a destination named {spec.name!r} exists already")
            created = await store.get(conn, spec.name)
            assert created is not None
            return created

        return await self.inbox.db.run(work)

    async def _visible(self, name: str, caller: Caller) -> Destination:
        destination = await self.inbox.db.run(lambda conn: store.get(conn, name))
        # One answer for "none" and "not yours": a token learns nothing of others' destinations.
        if destination is None or not glob_within_any(destination.spec.namespace_pattern, caller.namespaces):
            raise NotFound(f"no destination {name!r}")
        return destination

    async def get_destination(self, name: str, *, caller: Caller) -> tuple[Destination, list[DeliveryAttempt]]:
        """The destination and its latest attempts, newest first."""
        destination = await self._visible(name, caller)
        attempts = await self.inbox.db.run(lambda conn: store.recent_attempts(conn, name))
        return destination, attempts

    async def list_destinations(self, *, caller: Caller) -> list[Destination]:
        every = await self.inbox.db.run(store.list_all)
        return [d for d in every if glob_within_any(d.spec.namespace_pattern, caller.namespaces)]

    async def delete_destination(self, name: str, *, reason: str, caller: Caller) -> None:
        _require_reason(reason)
        await self._visible(name, caller)
        now = self.inbox.clock()
        if not await self.inbox.db.run(lambda c: store.delete(c, name, actor=caller.name, reason=reason, now=now)):
            raise NotFound(f"no destination {name!r}")

    async def resume_destination(self, name: str, *, reason: str, caller: Caller) -> Destination:
        """Closes the breaker now, audited: the destination delivers again at once."""
        _require_reason(reason)
        await self._visible(name, caller)
        now = self.inbox.clock()
        if not await self.inbox.db.run(lambda c: store.resume(c, name, actor=caller.name, reason=reason, now=now)):
            raise NotFound(f"no destination {name!r}")
        return await self._visible(name, caller)

    async def event_deliveries(self, namespace: str, event_key: str) -> list[DeliveryAttempt]:
        """Every POST of the event, oldest first."""
        return await self.inbox.db.run(lambda conn: store.attempts_of_event(conn, namespace, event_key))

    # The runner's calls.

    async def all_destinations(self) -> list[Destination]:
        return await self.inbox.db.run(store.list_all)

    async def record_delivery(self, attempt: DeliveryAttempt) -> None:
        await self.inbox.db.run(lambda conn: store.record_attempt(conn, attempt), transaction=False)

    async def destination_answered(self, name: str) -> bool:
        """The endpoint answered: its breaker closes; True when it was open."""
        return await self.inbox.db.run(lambda conn: store.answered(conn, name))

    async def destination_failed(self, name: str, reason: str) -> tuple[DestinationState, datetime | None] | None:
        now = self.inbox.clock()
        return await self.inbox.db.run(lambda conn: store.failed(conn, name, reason, now))

    async def take_destination_try(self, name: str, window: timedelta) -> bool:
        now = self.inbox.clock()
        return await self.inbox.db.run(lambda conn: store.take_try(conn, name, window, now))
