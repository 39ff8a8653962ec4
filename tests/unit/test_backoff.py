"""Backoff and the fate of a failed attempt, with no database."""

from __future__ import annotations

import random
from datetime import timedelta

from inboxd.domain.backoff import BackoffPolicy, decide_failure
from inboxd.domain.vocabulary import EventState

POLICY = BackoffPolicy(base=timedelta(seconds=1), factor=2.0, cap=timedelta(seconds=60))


def test_the_ceiling_doubles_per_attempt_up_to_the_cap() -> None:
    assert [POLICY.ceiling(a).total_seconds() for a in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert POLICY.ceiling(10_000) == timedelta(seconds=60)


def test_full_jitter_stays_within_zero_and_the_ceiling_and_spreads_out() -> None:
    rng = random.Random(7)
    delays = [POLICY.delay(4, rng).total_seconds() for _ in range(1000)]
    assert all(0 <= d <= 8 for d in delays)
    assert min(delays) < 1 and max(delays) > 7


def test_a_retryable_failure_with_attempts_left_is_retried() -> None:
    decision = decide_failure(attempt=2, max_attempts=10, permanent=False, retry_after=None, policy=POLICY)
    assert decision.state is EventState.PENDING
    assert decision.delay is not None and decision.delay <= timedelta(seconds=2)


def test_retry_after_wins_over_the_backoff() -> None:
    decision = decide_failure(
        attempt=1, max_attempts=10, permanent=False, retry_after=timedelta(minutes=5), policy=POLICY
    )
    assert decision.delay == timedelta(minutes=5)


def test_the_last_attempt_and_permanent_failures_dead_letter() -> None:
    assert decide_failure(attempt=10, max_attempts=10, permanent=False, retry_after=None, policy=POLICY).state is (
        EventState.DEAD_LETTERED
    )
    assert decide_failure(attempt=1, max_attempts=10, permanent=True, retry_after=None, policy=POLICY).state is (
        EventState.DEAD_LETTERED
    )
