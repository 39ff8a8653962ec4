"""The operators' use cases: inspect events, list them, replay them, read the inbox's health.

Their other acts (settle an action, end a claim, discard an event) stand in
operator_actions.py, flow control's rules in flow_control.py, bulk operations in
bulk_operations.py, and subscriptions in subscriptions.py: bases of Operators.

Like `inbox.py`, it takes validated domain values and writes no SQL. It
shares the Inbox's database, clock and settings, and wakes the Inbox's
waiting Claims when a Replay makes an event claimable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from inboxd.domain.conflict_copies import FIRST_PAGE, ConflictWindow
from inboxd.domain.errors import NotFound
from inboxd.domain.operator_views import EventPage, EventRecord, ListNarrowing, ListPosition, NamespaceStats
from inboxd.domain.trends import TRENDS_WINDOW, NamespaceTrend
from inboxd.domain.vocabulary import ActionRecord, EventState
from inboxd.observability.transition_observer import InboxObserver
from inboxd.store import actions, inspection, replays, trends
from inboxd.store.database import Connection
from inboxd.usecases.bulk_operations import BulkOperations
from inboxd.usecases.destinations import Destinations
from inboxd.usecases.flow_control import FlowControls
from inboxd.usecases.inbox import Inbox
from inboxd.usecases.operator_actions import OperatorActs
from inboxd.usecases.subscriptions import Subscriptions

ALL_STATES = tuple(EventState)


@dataclass
class Operators(OperatorActs, FlowControls, BulkOperations, Subscriptions, Destinations):
    inbox: Inbox
    observer: InboxObserver = field(default_factory=InboxObserver)

    async def get_event(self, namespace: str, event_key: str, conflicts: ConflictWindow = FIRST_PAGE) -> EventRecord:
        """The whole record, with one page of its conflicting copies (their payloads only when the window asks)."""
        record = await self.inbox.db.run(lambda conn: inspection.read_event(conn, namespace, event_key, conflicts))
        if record is None:
            raise NotFound.event(namespace, event_key)
        return record

    async def list_events(
        self,
        *,
        namespace: str | None,
        states: Sequence[EventState] = ALL_STATES,
        after: ListPosition | None = None,
        page_size: int = 100,
        narrowing: ListNarrowing | None = None,
    ) -> EventPage:
        """Summaries newest first; `after` is where the previous page stopped."""
        # Planned for its parameters: with a namespace or without, narrowed or not, are different scans.
        return await self.inbox.db.run(
            lambda conn: inspection.list_events(
                conn, namespace=namespace, states=states, after=after, page_size=page_size, narrowing=narrowing
            ),
            custom_plans=True,
        )

    async def replay(self, namespace: str, event_key: str, *, reason: str, actor: str) -> EventRecord:
        """Returns a COMPLETED or DEAD_LETTERED event to PENDING, audited; answers the record after."""
        now = self.inbox.clock()

        async def work(conn: Connection) -> tuple[replays.Replayed, EventRecord]:
            replayed = await replays.replay_event(conn, namespace, event_key, actor=actor, reason=reason, now=now)
            record = await inspection.read_event(conn, namespace, event_key)
            assert record is not None, "the event vanished inside its own replay"
            return replayed, record

        replayed, record = await self.inbox.db.run(work)
        # The event is claimable now: wake a waiting Claim here and on the other replicas.
        self.inbox.wake_claimers({(namespace, replayed.event_type): 1})
        self.observer.replayed(namespace, event_key, replayed.state_before, actor)
        return record

    async def unresolved_actions(self, namespace: str, limit: int = 200) -> list[tuple[str, ActionRecord]]:
        """The namespace's actions an operator may have to settle, oldest first: (event key, action)."""
        now, stale_after = self.inbox.clock(), self.inbox.settings.action_stale_after
        return await self.inbox.db.run(
            lambda conn: actions.list_unresolved_actions(conn, namespace, stale_after=stale_after, limit=limit, now=now)
        )

    async def stats(self, namespace: str | None) -> list[NamespaceStats]:
        now = self.inbox.clock()
        stale_after = self.inbox.settings.action_stale_after
        # Planned for its parameters: one namespace reads its own counts and due index range.
        return await self.inbox.db.run(
            lambda conn: inspection.namespace_stats(conn, namespace=namespace, action_stale_after=stale_after, now=now),
            custom_plans=True,
        )

    async def trends(self, namespaces: Sequence[str]) -> list[NamespaceTrend]:
        """The kept window's per-minute counts and oldest-claimable ages of these namespaces, up to now."""
        now = self.inbox.clock()
        return await self.inbox.db.run(lambda conn: trends.read_trends(conn, namespaces, window=TRENDS_WINDOW, now=now))
