"""An Inbox that reports each transition to an observer (metrics, the structured log).

A subclass rather than calls sprinkled through `Inbox`: the use cases stay
about the inbox, and what is counted and logged is decided here, in one place.
Observers hear only about committed transitions, and about fenced calls
refused because their claim is not current.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from inboxd.domain.errors import ClaimSuperseded, InboxError
from inboxd.domain.vocabulary import (
    AcceptResult,
    ActionRecord,
    ActionState,
    ClaimBatch,
    ClaimRequest,
    Disposition,
    FailResult,
    Fence,
    NewEvent,
)
from inboxd.observability.transition_observer import InboxObserver
from inboxd.store.claims import Completion
from inboxd.usecases.inbox import Inbox


@dataclass
class ObservedInbox(Inbox):
    observer: InboxObserver = field(default_factory=InboxObserver)

    @contextlib.contextmanager
    def _fenced(self, call: str, fence: Fence) -> Iterator[None]:
        try:
            yield
        except ClaimSuperseded:
            self.observer.stale_claim_rejected(call, fence)
            raise

    async def _accept_group(self, events: list[NewEvent]) -> list[AcceptResult]:
        # Per group, not per call: counters move and the log writes once for
        # all the callers who shared the transaction.
        results = await super()._accept_group(events)
        self.observer.accepted(events, results)
        return results

    async def _claim_once(self, request: ClaimRequest) -> ClaimBatch:
        # Each round, not just the Claim's last one: a waiting Claim's empty
        # rounds may still have taken over expired leases or dead-lettered events.
        batch = await super()._claim_once(request)
        self.observer.claimed(request.worker_id, batch)
        return batch

    async def renew_lease(self, fence: Fence, lease: timedelta) -> datetime:
        with self._fenced("RenewLease", fence):
            return await super().renew_lease(fence, lease)

    async def complete(self, fence: Fence, disposition: Disposition, reason: str) -> None:
        with self._fenced("Complete", fence):
            await super().complete(fence, disposition, reason)
        self.observer.completed(fence, disposition)

    async def complete_many(self, completions: Sequence[Completion]) -> list[InboxError | None]:
        results = await super().complete_many(completions)
        for completion, result in zip(completions, results, strict=True):
            if result is None:
                self.observer.completed(completion.fence, completion.disposition)
            elif isinstance(result, ClaimSuperseded):
                self.observer.stale_claim_rejected("CompleteBatch", completion.fence)
        return results

    async def fail(self, fence: Fence, error: str, *, permanent: bool, retry_after: timedelta | None) -> FailResult:
        with self._fenced("Fail", fence):
            result = await super().fail(fence, error, permanent=permanent, retry_after=retry_after)
        self.observer.failed(fence, result)
        return result

    async def record_action(
        self, fence: Fence, action: str, state: ActionState, *, external_ref: str, detail: str
    ) -> ActionRecord:
        with self._fenced("RecordActionOutcome", fence):
            record = await super().record_action(fence, action, state, external_ref=external_ref, detail=detail)
        self.observer.action_recorded(fence, record)
        return record

    async def release(self, fence: Fence) -> None:
        with self._fenced("Release", fence):
            await super().release(fence)
        self.observer.released([fence])

    async def release_many(self, fences: Sequence[Fence]) -> None:
        await super().release_many(fences)
        self.observer.released(fences)
