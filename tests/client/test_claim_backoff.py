"""The worker's claim back-off on its own: pauses after empty and failed Claims, and the batch it asks for."""

from __future__ import annotations

import pytest

from inboxd_client import Unavailable
from inboxd_client.backoff import Backoff
from inboxd_client.claim_backoff import IDLE_CAP, MAX_EVENTS_PER_CLAIM, ClaimPacer
from inboxd_client.errors import ResourceExhausted


def test_a_backoff_doubles_up_to_its_cap_and_starts_over_after_reset() -> None:
    backoff = Backoff(0.1, 0.5)
    assert [backoff.next() for _ in range(5)] == [0.1, 0.2, 0.4, 0.5, 0.5]
    backoff.reset()
    assert backoff.next() == 0.1
    with pytest.raises(ValueError, match="first"):
        Backoff(1.0, 0.5)


def test_empty_wait_0_answers_pause_longer_each_time_and_work_resets_the_pause() -> None:
    pacer = ClaimPacer()
    pauses = [pacer.answered(0, long_polls=False) for _ in range(8)]
    assert pauses == sorted(pauses) and pauses[0] > 0 and pauses[-1] == IDLE_CAP
    assert pacer.answered(3, long_polls=False) == 0.0
    assert pacer.answered(0, long_polls=False) == pauses[0]
    # A long-polling worker's next Claim waits at the server.
    assert pacer.answered(0, long_polls=True) == 0.0


def test_a_claim_answer_too_big_for_the_channel_halves_the_batch_down_to_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pacer = ClaimPacer()
    assert pacer.max_events(500) == MAX_EVENTS_PER_CLAIM
    asked = [pacer.max_events(8)]
    for _ in range(5):
        pacer.failed(ResourceExhausted("Received message larger than max", method="Claim"))
        asked.append(pacer.max_events(8))
    assert asked == [8, 4, 2, 1, 1, 1]
    assert "asking for at most 4 per Claim" in caplog.text
    # The server's refusal of one more waiting Claim leases nothing: fewer events would not help.
    pacer = ClaimPacer()
    pacer.max_events(8)
    pacer.failed(ResourceExhausted("'w' already holds 16 waiting Claims; claim with wait=0", method="Claim"))
    assert pacer.max_events(8) == 8
    # Other failures pause, and leave the batch alone.
    pacer = ClaimPacer()
    pacer.max_events(8)
    first = pacer.failed(Unavailable("down", method="Claim"))
    assert pacer.failed(Unavailable("down", method="Claim")) == 2 * first
    assert pacer.max_events(8) == 8
