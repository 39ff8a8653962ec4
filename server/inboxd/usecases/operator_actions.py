"""The operators' acts beyond Replay: settle an action, end a claim now, discard an event.

A base of `usecases.admin.Operators`, as `Claiming` is of the Inbox: each act
runs in one transaction (the store judges it against what the operator saw,
under its lock), answers the event's whole record as it stands after, wakes
the Claims that may now take an event, and tells the observer, after commit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from inboxd.domain.operator_actions import ClaimEnding, Discarding, OperatorActionKind, Settlement
from inboxd.domain.operator_views import EventRecord
from inboxd.store import inspection
from inboxd.store import operator_actions as store
from inboxd.store.database import Connection

if TYPE_CHECKING:
    from inboxd.observability.transition_observer import InboxObserver
    from inboxd.usecases.inbox import Inbox


async def _record_after(conn: Connection, namespace: str, event_key: str) -> EventRecord:
    record = await inspection.read_event(conn, namespace, event_key)
    assert record is not None, "the event vanished inside an operator's act on it"
    return record


class OperatorActs:
    """SettleAction, EndClaim and Discard; the dataclass that inherits this holds the Inbox and the observer."""

    inbox: Inbox
    observer: InboxObserver

    async def settle_action(self, settlement: Settlement, *, actor: str) -> EventRecord:
        """Records the operator's outcome for an UNKNOWN action, or one INTENDED by a claim no longer current."""
        now = self.inbox.clock()

        async def work(conn: Connection) -> EventRecord:
            await store.settle_action(conn, settlement, actor=actor, now=now)
            return await _record_after(conn, settlement.namespace, settlement.event_key)

        record = await self.inbox.db.run(work)
        self.observer.operator_acted(
            settlement.namespace, settlement.event_key, OperatorActionKind.SETTLE_ACTION, actor
        )
        return record

    async def end_claim(self, ending: ClaimEnding, *, actor: str) -> EventRecord:
        """Ends the claim the operator saw holding the event: PENDING now, its token dead."""
        now = self.inbox.clock()

        async def work(conn: Connection) -> tuple[store.Acted, EventRecord]:
            acted = await store.end_claim(conn, ending, actor=actor, now=now)
            return acted, await _record_after(conn, ending.namespace, ending.event_key)

        acted, record = await self.inbox.db.run(work)
        # Claimable at once (a keyed one is its key's next): wake a waiting Claim here and on the other replicas.
        self.inbox.wake_claimers({(ending.namespace, acted.event_type): 1})
        self.observer.operator_acted(ending.namespace, ending.event_key, OperatorActionKind.END_CLAIM, actor)
        return record

    async def discard(self, discarding: Discarding, *, actor: str) -> EventRecord:
        """Completes a PENDING or DEAD_LETTERED event as IGNORED with the operator's reason."""
        now = self.inbox.clock()

        async def work(conn: Connection) -> tuple[store.Acted, EventRecord]:
            acted = await store.discard_event(conn, discarding, actor=actor, now=now)
            return acted, await _record_after(conn, discarding.namespace, discarding.event_key)

        acted, record = await self.inbox.db.run(work)
        if acted.ordering_key:
            # A discarded keyed event no longer holds its key back: the key's next event may be claimable now.
            self.inbox.wake_next_of_keys([(discarding.namespace, discarding.event_key)])
        self.observer.operator_acted(discarding.namespace, discarding.event_key, OperatorActionKind.DISCARD, actor)
        return record
