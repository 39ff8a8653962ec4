"""Claim back-off: how long a worker waits before its next Claim, and how many events that Claim asks for.

Three things slow a worker's claiming down, each for its own reason:

- a Claim that failed (UNAVAILABLE, say) is tried again after a pause that
  doubles up to 1 s: a refused connection costs the server nothing, and a
  worker should be back within a second or two of its server (it logs when
  it is);
- a Claim with `wait=0` that came back empty is followed by a pause that
  doubles up to 1 s: without a long-poll the server cannot hold the Claim
  until work arrives, and an idle worker would otherwise send a Claim (a
  database statement) every millisecond. Work arriving resets it;
- a Claim answered RESOURCE_EXHAUSTED (its answer passed the channel's
  receive limit, the events in it already leased) halves the batch, down to
  one event: asking again for as many would lose them the same way, until
  their attempts run out.
"""

from __future__ import annotations

import logging
import time

from inboxd_client.backoff import Backoff
from inboxd_client.errors import (
    Cancelled,
    DeadlineExceeded,
    InboxError,
    Internal,
    ResourceExhausted,
    Unavailable,
    Unknown,
)

log = logging.getLogger("inboxd_client.worker")

# Claim errors worth polling again after a pause; any other (UNAUTHENTICATED,
# PERMISSION_DENIED, INVALID_ARGUMENT ...) is a mistake that waiting cannot fix.
TRANSIENT_CLAIM_ERRORS = (Unavailable, DeadlineExceeded, Internal, Unknown, Cancelled, ResourceExhausted)
CLAIM_RETRY_FIRST = 0.25
CLAIM_RETRY_CAP = 1.0
# After an empty `wait=0` Claim. The cap is the server's own fallback poll
# (1 s): a long-polling worker may wait as long for an event nobody signalled.
IDLE_FIRST = 0.05
IDLE_CAP = 1.0
MAX_EVENTS_PER_CLAIM = 100


class ClaimPacer:
    """One worker's claim back-off: the pause before its next Claim and the most events that Claim asks for."""

    def __init__(self) -> None:
        self.batch = MAX_EVENTS_PER_CLAIM
        self.asked = 0
        self._errors = Backoff(CLAIM_RETRY_FIRST, CLAIM_RETRY_CAP)
        self._idle = Backoff(IDLE_FIRST, IDLE_CAP)
        # Since when claiming has failed, and how often (None: it works): said once it works again.
        self._failing_since: float | None = None
        self._failures = 0

    def max_events(self, free: int) -> int:
        """How many events a Claim with `free` slots asks for (remembered, should that Claim fail)."""
        self.asked = max(1, min(free, self.batch))
        return self.asked

    def answered(self, events: int, *, long_polls: bool) -> float:
        """A Claim brought `events`: the pause before the next one (0 for none; none when the worker `long_polls`)."""
        self._errors.reset()
        if self._failing_since is not None:
            log.info(
                "connected to inboxd again, after %d failed attempts over %.1f s",
                self._failures,
                time.monotonic() - self._failing_since,
            )
            self._failing_since, self._failures = None, 0
        if events or long_polls:
            self._idle.reset()
            return 0.0
        return self._idle.next()

    def failed(self, error: InboxError, *, stream: bool = False) -> float:
        """The last Claim failed with `error` (one of TRANSIENT_CLAIM_ERRORS): the pause before the next.

        `stream`: it was the Work stream that broke, where the batch is the
        credit given at a time (a push of that many events was too big).
        """
        pause = self._errors.next()
        if self._failing_since is None:
            self._failing_since = time.monotonic()
        self._failures += 1
        if _too_big(error) and self.batch > 1:
            self.batch = max(1, min(self.asked, self.batch) // 2)
            log.warning(
                "a %s of %d events was answered RESOURCE_EXHAUSTED (%s): asking for at most %d per %s"
                " from now on, %s again in %.1f s",
                "Work stream's credit" if stream else "Claim",
                self.asked,
                error,
                self.batch,
                "push" if stream else "Claim",
                "subscribing" if stream else "polling",
                pause,
            )
        elif stream:
            log.warning("the Work stream broke, subscribing again in %.1f s: %s", pause, error)
        else:
            log.warning("claim failed, polling again in %.1f s: %s", pause, error)
        return pause


def _too_big(error: InboxError) -> bool:
    """Whether a Claim's RESOURCE_EXHAUSTED says its answer was too big, rather than the server's other refusal.

    The server also answers RESOURCE_EXHAUSTED to a caller that holds too many
    waiting Claims, before it leases anything: fewer events per Claim would not
    help, so that one (its details name the waiting Claims) leaves the batch
    alone. Any other is taken for a size limit, gRPC's own ("Received message
    larger than max"), since guessing wrong that way only costs throughput.
    """
    return isinstance(error, ResourceExhausted) and "waiting Claims" not in error.details
