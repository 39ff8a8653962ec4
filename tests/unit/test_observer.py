"""Observers hear committed transitions; a broken one must not break the answer or silence the others."""

from __future__ import annotations

from inboxd.domain.vocabulary import ClaimBatch
from inboxd.observability.transition_observer import InboxObserver, Observers


class Broken(InboxObserver):
    def claimed(self, worker_id: str, batch: ClaimBatch) -> None:
        raise RuntimeError("metrics backend exploded")


class Counting(InboxObserver):
    def __init__(self) -> None:
        self.claims = 0

    def claimed(self, worker_id: str, batch: ClaimBatch) -> None:
        self.claims += 1


def test_an_observer_that_raises_does_not_silence_the_next_one() -> None:
    counting = Counting()
    Observers(Broken(), counting).claimed("w", ClaimBatch(events=[]))
    assert counting.claims == 1
