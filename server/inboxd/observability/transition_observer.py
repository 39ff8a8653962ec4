"""Who hears about the inbox's transitions: metrics and the structured log.

The use cases report what happened through an `InboxObserver`; they neither
count nor log themselves. The base class hears nothing, so an observer
overrides only what it cares about.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from inboxd.domain.operator_actions import OperatorActionKind
from inboxd.domain.operator_views import RetentionCounts
from inboxd.domain.vocabulary import (
    AcceptResult,
    ActionRecord,
    ClaimBatch,
    Disposition,
    EventState,
    FailResult,
    Fence,
    NewEvent,
)

log = logging.getLogger(__name__)


class InboxObserver:
    """Hears every transition; each method must be cheap and must not raise."""

    def accepted(self, events: Sequence[NewEvent], results: Sequence[AcceptResult]) -> None:
        """A batch committed: one result per event, in order (the dedupe decisions)."""

    def copied(self, copies: Sequence[NewEvent]) -> None:
        """Subscriptions' copies committed with their originals' Accepts: new events, each in its namespace."""

    def claimed(self, worker_id: str, batch: ClaimBatch) -> None:
        """A Claim committed: the events leased, and the expired leases and exhausted events it met."""

    def completed(self, fence: Fence, disposition: Disposition) -> None:
        """PROCESSING -> COMPLETED (or a repeated Complete by the completing claim)."""

    def failed(self, fence: Fence, result: FailResult) -> None:
        """PROCESSING -> PENDING (retry) or DEAD_LETTERED."""

    def released(self, fences: Sequence[Fence]) -> None:
        """PROCESSING -> PENDING without counting the attempt."""

    def action_recorded(self, fence: Fence, record: ActionRecord) -> None:
        """An action's intent or outcome was written to the ledger."""

    def stale_claim_rejected(self, call: str, fence: Fence) -> None:
        """A fenced call named a claim that is not current: answered ABORTED, nothing changed."""

    def replayed(self, namespace: str, event_key: str, state_before: EventState, actor: str) -> None:
        """An operator returned the event to PENDING."""

    def operator_acted(self, namespace: str, event_key: str, kind: OperatorActionKind, actor: str) -> None:
        """An operator settled one of the event's actions, ended its claim, or discarded it."""

    def retention_ran(self, counts: RetentionCounts) -> None:
        """A retention pass finished on this replica."""

    def accept_stream_held(self, change: int) -> None:
        """AcceptStreams hold `change` more (or fewer) unanswered items: read, not yet answered."""

    def work_streams_open(self, change: int) -> None:
        """`change` more (or fewer) Work streams are open."""

    def work_credit(self, change: int) -> None:
        """Work streams' credit not yet used by a push moved by `change`."""

    def work_pushed(self, count: int) -> None:
        """A Work stream pushed `count` events, claimed for it."""

    def work_stream_ended_holding(self, events: int) -> None:
        """A Work stream ended; `events` of the claims it held ended with it (0: it held none)."""

    def leases_ended_dead(self, namespaces: Sequence[str]) -> None:
        """PROCESSING -> DEAD_LETTERED outside a Claim or a Fail: a lease ended (the rescuer, a Work
        stream's end) on the last attempt; the namespace of each event."""


class Observers(InboxObserver):
    """Tells several observers, in order.

    An observer that raises is logged and skipped: the transition it heard
    about has committed, and the caller must get its answer.
    """

    def __init__(self, *observers: InboxObserver) -> None:
        self.observers = observers

    def _each(self, tell: Callable[[InboxObserver], None]) -> None:
        for observer in self.observers:
            try:
                tell(observer)
            except Exception:
                log.exception("observer %s failed", type(observer).__name__)

    def accepted(self, events: Sequence[NewEvent], results: Sequence[AcceptResult]) -> None:
        self._each(lambda o: o.accepted(events, results))

    def copied(self, copies: Sequence[NewEvent]) -> None:
        self._each(lambda o: o.copied(copies))

    def claimed(self, worker_id: str, batch: ClaimBatch) -> None:
        self._each(lambda o: o.claimed(worker_id, batch))

    def completed(self, fence: Fence, disposition: Disposition) -> None:
        self._each(lambda o: o.completed(fence, disposition))

    def failed(self, fence: Fence, result: FailResult) -> None:
        self._each(lambda o: o.failed(fence, result))

    def released(self, fences: Sequence[Fence]) -> None:
        self._each(lambda o: o.released(fences))

    def action_recorded(self, fence: Fence, record: ActionRecord) -> None:
        self._each(lambda o: o.action_recorded(fence, record))

    def stale_claim_rejected(self, call: str, fence: Fence) -> None:
        self._each(lambda o: o.stale_claim_rejected(call, fence))

    def replayed(self, namespace: str, event_key: str, state_before: EventState, actor: str) -> None:
        self._each(lambda o: o.replayed(namespace, event_key, state_before, actor))

    def operator_acted(self, namespace: str, event_key: str, kind: OperatorActionKind, actor: str) -> None:
        self._each(lambda o: o.operator_acted(namespace, event_key, kind, actor))

    def retention_ran(self, counts: RetentionCounts) -> None:
        self._each(lambda o: o.retention_ran(counts))

    def accept_stream_held(self, change: int) -> None:
        self._each(lambda o: o.accept_stream_held(change))

    def work_streams_open(self, change: int) -> None:
        self._each(lambda o: o.work_streams_open(change))

    def work_credit(self, change: int) -> None:
        self._each(lambda o: o.work_credit(change))

    def work_pushed(self, count: int) -> None:
        self._each(lambda o: o.work_pushed(count))

    def work_stream_ended_holding(self, events: int) -> None:
        self._each(lambda o: o.work_stream_ended_holding(events))

    def leases_ended_dead(self, namespaces: Sequence[str]) -> None:
        self._each(lambda o: o.leases_ended_dead(namespaces))
