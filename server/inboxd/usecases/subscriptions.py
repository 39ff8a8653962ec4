"""Subscriptions for operators (create, read, list, delete), and the copies an Accept made, as events.

A base of `usecases.admin.Operators`, as `FlowControls` is. Each call is the
caller's within its grants: a subscription reads the namespaces its pattern
matches and writes its copies under `<name>/`, so the caller's token must be
granted both. A listing shows only the subscriptions the caller may see.
A change is written with its audit row in one transaction. The accept
statement reads the table itself, so a subscription binds every replica's
Accepts from its commit on: there is no cache to invalidate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from inboxd.config.tokens import Caller
from inboxd.domain.errors import NotFound, PermissionDenied
from inboxd.domain.namespace_patterns import glob_within_any
from inboxd.domain.subscriptions import Subscription, SubscriptionChange, SubscriptionSpec, check_name, copy_namespace
from inboxd.domain.validation import required_reason
from inboxd.store import subscriptions as store
from inboxd.store.database import Connection

if TYPE_CHECKING:
    from inboxd.usecases.inbox import Inbox


def _visible(caller: Caller, subscription: Subscription | SubscriptionSpec) -> bool:
    """Whether the caller's grants cover what the subscription reads and what it writes."""
    return glob_within_any(subscription.namespace_pattern, caller.namespaces) and glob_within_any(
        copy_namespace(subscription.name, "*"), caller.namespaces
    )


def _require_visible(caller: Caller, subscription: Subscription | SubscriptionSpec) -> None:
    if not _visible(caller, subscription):
        raise PermissionDenied(
            f"token {caller.name!r} is not granted both {subscription.namespace_pattern!r} (what subscription"
            f" {subscription.name!r} reads) and {copy_namespace(subscription.name, '*')!r} (where its copies go):"
            f" its namespaces are {', '.join(caller.namespaces) or 'none'}"
        )


class Subscriptions:
    """CreateSubscription, GetSubscription, ListSubscriptions, DeleteSubscription; the dataclass holds the Inbox."""

    inbox: Inbox

    async def create_subscription(
        self, spec: SubscriptionSpec, *, reason: str, caller: Caller
    ) -> tuple[Subscription, bool]:
        """Creates it, audited; answers it and whether it is new (a retried create finds it unchanged)."""
        required_reason(reason)
        _require_visible(caller, spec)
        now = self.inbox.clock()
        return await self.inbox.db.run(lambda conn: store.create(conn, spec, actor=caller.name, reason=reason, now=now))

    async def get_subscription(self, name: str, *, caller: Caller) -> tuple[Subscription, list[SubscriptionChange]]:
        """The subscription and its audited changes, newest first."""
        check_name("name", name)

        async def read(conn: Connection) -> tuple[Subscription | None, list[SubscriptionChange]]:
            return await store.find(conn, name), await store.recent_changes(conn, name)

        found, changes = await self.inbox.db.run(read)
        if found is None:
            raise NotFound(f"no subscription {name!r}")
        _require_visible(caller, found)
        return found, changes

    async def list_subscriptions(self, *, caller: Caller) -> list[Subscription]:
        """Every subscription within the caller's grants, by name."""
        return [s for s in await self.inbox.db.run(store.list_all) if _visible(caller, s)]

    async def delete_subscription(self, name: str, *, reason: str, caller: Caller) -> Subscription:
        """Deletes it, audited; its copies stay, events of their own. Answers it as it was."""
        check_name("name", name)
        required_reason(reason)

        async def work(conn: Connection) -> Subscription:
            found = await store.find(conn, name)
            if found is None:
                raise NotFound(f"no subscription {name!r}")
            _require_visible(caller, found)
            return await store.delete(conn, name, actor=caller.name, reason=reason, now=now)

        now = self.inbox.clock()
        removed = await self.inbox.db.run(work)
        # Maybe the last one: the lean accept statement says so at the next Accept.
        self.inbox.fan_out.look_again()
        return removed
