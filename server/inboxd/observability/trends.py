"""The in-process minute tally the console's trends are written from.

It hears the same transitions the Prometheus counters hear (it is an
InboxObserver beside them), but per namespace: accepted (new rows only, not
duplicates or conflicts), completed, and dead-lettered: by Fail, by a Claim
meeting an event whose attempts are spent (the claim statement names the
namespace of each), and by a lease ended on the last attempt (the rescuer,
a Work stream's end).

`take()` hands the tally over and starts a new one; the periodic writer
(background/trends.py) stores it in one statement. Namespaces are minted by
any accept caller, so at most `max_namespaces` are tallied on their own in
one minute, the rest summed under "other", as the metrics' label cap does.
"""

from __future__ import annotations

from collections.abc import Sequence

from inboxd.domain.trends import MinuteCounts
from inboxd.domain.vocabulary import (
    AcceptOutcome,
    AcceptResult,
    ClaimBatch,
    Disposition,
    EventState,
    FailResult,
    Fence,
    NewEvent,
)
from inboxd.observability.metrics import OTHER_NAMESPACES
from inboxd.observability.transition_observer import InboxObserver

_ACCEPTED, _COMPLETED, _DEAD = 0, 1, 2


class TrendTally(InboxObserver):
    """Per-namespace counts since the last `take()`; cheap enough for the hot paths (a dict and a list)."""

    def __init__(self, max_namespaces: int = 100) -> None:
        self.max_namespaces = max_namespaces
        self._counts: dict[str, list[int]] = {}

    def _add(self, namespace: str, which: int, count: int = 1) -> None:
        row = self._counts.get(namespace)
        if row is None:
            if len(self._counts) >= self.max_namespaces:
                namespace = OTHER_NAMESPACES
                row = self._counts.get(namespace)
            if row is None:
                row = self._counts[namespace] = [0, 0, 0]
        row[which] += count

    def take(self) -> list[MinuteCounts]:
        """What was counted since the last take, and a fresh tally; empty when nothing happened."""
        counts, self._counts = self._counts, {}
        return [MinuteCounts(ns, accepted=a, completed=c, dead_lettered=d) for ns, (a, c, d) in counts.items()]

    def give_back(self, counts: Sequence[MinuteCounts]) -> None:
        """Counts a write could not store: they ride in the next one rather than vanish."""
        for c in counts:
            self._add(c.namespace, _ACCEPTED, c.accepted)
            self._add(c.namespace, _COMPLETED, c.completed)
            self._add(c.namespace, _DEAD, c.dead_lettered)

    # -- InboxObserver --

    def accepted(self, events: Sequence[NewEvent], results: Sequence[AcceptResult]) -> None:
        for event, result in zip(events, results, strict=False):
            if result.outcome is AcceptOutcome.ACCEPTED:
                self._add(event.namespace, _ACCEPTED)

    def copied(self, copies: Sequence[NewEvent]) -> None:
        # A copy is a new event of its namespace: its trend counts it as accepted there.
        for copy in copies:
            self._add(copy.namespace, _ACCEPTED)

    def completed(self, fence: Fence, disposition: Disposition) -> None:
        self._add(fence.namespace, _COMPLETED)

    def failed(self, fence: Fence, result: FailResult) -> None:
        if result.state is EventState.DEAD_LETTERED:
            self._add(fence.namespace, _DEAD)

    def claimed(self, worker_id: str, batch: ClaimBatch) -> None:
        for namespace in batch.dead_lettered_in:
            self._add(namespace, _DEAD)

    def leases_ended_dead(self, namespaces: Sequence[str]) -> None:
        for namespace in namespaces:
            self._add(namespace, _DEAD)
