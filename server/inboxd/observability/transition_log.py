"""The structured log of the inbox's transitions: dedupe decisions, claims, actions, replays.

Each line names its event by `event_ref` (a hash), never by its key. It
carries no payload, no claim token and no worker-supplied text (a Fail's
error or an action's detail may quote the payload); what it carries is
enough to follow one event through its life and to find it again.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence

from inboxd.domain.operator_actions import OperatorActionKind
from inboxd.domain.operator_views import RetentionCounts
from inboxd.domain.vocabulary import (
    AcceptOutcome,
    AcceptResult,
    ActionRecord,
    ActionState,
    ClaimBatch,
    Disposition,
    EventState,
    FailResult,
    Fence,
    NewEvent,
)
from inboxd.observability.logs import event_ref, log_fields
from inboxd.observability.transition_observer import InboxObserver

log = logging.getLogger("inboxd.events")

# Per-event lines of the hot transitions (accept, claim, complete, release)
# are DEBUG: at INFO, a line per event would cost more than the event's own
# work. INFO gets one line per group of accepts; what needs a person's eye
# (a conflicting copy, a dead letter, a stale claim, a replay) stays per event.
_ACCEPT_LEVEL = {
    AcceptOutcome.ACCEPTED: logging.DEBUG,
    AcceptOutcome.DUPLICATE: logging.DEBUG,
    # The same key with another payload: the edge's key resolution may be wrong.
    AcceptOutcome.CONFLICT: logging.WARNING,
}


def _ref(fence: Fence) -> dict[str, object]:
    return {"namespace": fence.namespace, "event": event_ref(fence.namespace, fence.event_key)}


# Under load a group commit holds a handful of events, so even a line per
# group costs a formatted record and a write() for every few events (py-spy
# showed it beside the RPC itself). At INFO the accepts are summed instead:
# one line per interval at most, written when the next group after it commits.
SUMMARY_SECONDS = 10.0


class TransitionLog(InboxObserver):
    def __init__(
        self, *, summary_seconds: float = SUMMARY_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._summary_seconds = summary_seconds
        self._clock = clock
        self._summary_since = clock()
        self._summary: Counter[str] = Counter()

    def accepted(self, events: Sequence[NewEvent], results: Sequence[AcceptResult]) -> None:
        """INFO: one summary line per interval; DEBUG: a line per group and per event; a conflict: WARNING."""
        if log.isEnabledFor(logging.INFO):
            counts = Counter(r.outcome.value for r in results)
            if log.isEnabledFor(logging.DEBUG):
                log_fields(log, logging.DEBUG, "accept group", events=len(results), **counts)
            self._sum_accepts(counts)
        per_event = log.isEnabledFor(logging.DEBUG)
        for event, result in zip(events, results, strict=True):
            if not per_event and result.outcome is not AcceptOutcome.CONFLICT:
                continue
            log_fields(
                log,
                _ACCEPT_LEVEL[result.outcome],
                f"accept {result.outcome.value}",
                namespace=event.namespace,
                event=event_ref(event.namespace, event.event_key),
                event_type=event.event_type,
                outcome=result.outcome.value,
                state=result.state.value,
            )

    def _sum_accepts(self, counts: Counter[str]) -> None:
        self._summary.update(counts)
        self._summary["groups"] += 1
        now = self._clock()
        if now - self._summary_since >= self._summary_seconds:
            groups = self._summary.pop("groups")
            seconds = round(now - self._summary_since, 1)
            log_fields(log, logging.INFO, "accepts", seconds=seconds, groups=groups, **self._summary)
            self._summary = Counter()
            self._summary_since = now

    def claimed(self, worker_id: str, batch: ClaimBatch) -> None:
        for e in batch.events if log.isEnabledFor(logging.DEBUG) else ():
            log_fields(
                log,
                logging.DEBUG,
                "event claimed",
                namespace=e.namespace,
                event=event_ref(e.namespace, e.event_key),
                event_type=e.event_type,
                attempt=e.attempt,
                fencing_token=e.fencing_token,
                worker_id=worker_id,
            )
        if batch.leases_expired:
            log_fields(log, logging.WARNING, "expired leases taken over", leases_expired=batch.leases_expired)
        if batch.dead_lettered:
            log_fields(log, logging.WARNING, "events dead-lettered: attempts exhausted", count=batch.dead_lettered)

    def completed(self, fence: Fence, disposition: Disposition) -> None:
        if log.isEnabledFor(logging.DEBUG):
            log_fields(log, logging.DEBUG, "event completed", **_ref(fence), disposition=disposition.value)

    def failed(self, fence: Fence, result: FailResult) -> None:
        if result.state is EventState.DEAD_LETTERED:
            log_fields(log, logging.WARNING, "event dead-lettered", **_ref(fence), state=result.state.value)
            return
        log_fields(log, logging.INFO, "event failed, will retry", **_ref(fence), next_attempt_at=result.next_attempt_at)

    def released(self, fences: Sequence[Fence]) -> None:
        for fence in fences if log.isEnabledFor(logging.DEBUG) else ():
            log_fields(log, logging.DEBUG, "event released", **_ref(fence))

    def action_recorded(self, fence: Fence, record: ActionRecord) -> None:
        # UNKNOWN waits for a person or a reconciler; the rest is routine.
        level = logging.WARNING if record.state is ActionState.UNKNOWN else logging.DEBUG
        log_fields(
            log,
            level,
            "action recorded",
            **_ref(fence),
            action=record.action,
            action_state=record.state.value,
            idempotency_key=record.idempotency_key,
            external_ref=record.external_ref,
            fencing_token=record.fencing_token,
        )

    def stale_claim_rejected(self, call: str, fence: Fence) -> None:
        log_fields(log, logging.WARNING, "stale claim rejected", **_ref(fence), call=call)

    def replayed(self, namespace: str, event_key: str, state_before: EventState, actor: str) -> None:
        log_fields(
            log,
            logging.WARNING,
            "event replayed",
            namespace=namespace,
            event=event_ref(namespace, event_key),
            state_before=state_before.value,
            actor=actor,
        )

    def operator_acted(self, namespace: str, event_key: str, kind: OperatorActionKind, actor: str) -> None:
        log_fields(
            log,
            logging.WARNING,
            f"operator acted: {kind.value}",
            namespace=namespace,
            event=event_ref(namespace, event_key),
            actor=actor,
        )

    def retention_ran(self, counts: RetentionCounts) -> None:
        level = logging.INFO if counts.rows_deleted or counts.payloads_dropped else logging.DEBUG
        log_fields(
            log,
            level,
            "retention pass",
            rows_deleted=counts.rows_deleted,
            payloads_dropped=counts.payloads_dropped,
        )
