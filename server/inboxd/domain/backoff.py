"""What a failed attempt leads to: a retry after a backoff, or dead letters."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta

from inboxd.domain.vocabulary import EventState

# Beyond this many doublings every realistic cap is reached; stop computing.
_MAX_EXPONENT = 64


@dataclass(frozen=True, slots=True)
class BackoffPolicy:
    """Exponential backoff with full jitter: uniform in [0, min(cap, base * factor**(attempt-1))]."""

    base: timedelta = timedelta(seconds=1)
    factor: float = 2.0
    cap: timedelta = timedelta(hours=1)

    def ceiling(self, attempt: int) -> timedelta:
        """The longest delay after failed attempt number `attempt` (1-based)."""
        exponent = min(max(attempt - 1, 0), _MAX_EXPONENT)
        seconds = self.base.total_seconds() * self.factor**exponent
        # Compared as floats: 2**64 seconds does not fit a timedelta.
        return timedelta(seconds=min(self.cap.total_seconds(), seconds))

    def delay(self, attempt: int, rng: random.Random | None = None) -> timedelta:
        # Full jitter spreads a burst of failures out instead of retrying them in lockstep.
        fraction = (rng or _rng).random()
        return self.ceiling(attempt) * fraction


_rng = random.Random()


@dataclass(frozen=True, slots=True)
class FailureDecision:
    state: EventState
    # None when dead-lettered.
    delay: timedelta | None
    reason: str


def decide_failure(
    *,
    attempt: int,
    max_attempts: int,
    permanent: bool,
    retry_after: timedelta | None,
    policy: BackoffPolicy,
    rng: random.Random | None = None,
) -> FailureDecision:
    if permanent:
        return FailureDecision(EventState.DEAD_LETTERED, None, "failed permanently")
    if attempt >= max_attempts:
        return FailureDecision(EventState.DEAD_LETTERED, None, f"attempts exhausted ({attempt} of {max_attempts})")
    delay = retry_after if retry_after is not None else policy.delay(attempt, rng)
    return FailureDecision(EventState.PENDING, delay, "retry scheduled")
