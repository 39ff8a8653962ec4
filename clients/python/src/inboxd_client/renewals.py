"""Renewals: how a worker keeps a claimed event's lease alive while its handler runs.

A renewal is due every third of the lease, so two may fail before the lease
ends. Each one's deadline is a fraction of that interval, and a failed one is
tried again at once (after a short, growing pause) rather than an interval
later: one renewal that hangs (a row lock, a lost packet, a stalled proxy)
must cost a fraction of the lease, not the lease.

On the Work stream the server keeps the leases alive by itself while the
stream lives; the renewals still go, over the stream (a quarter of a unary
call's cost, and only for handlers that outlive a third of the lease),
because an ABORTED answer is how a handler learns that its claim was lost
while the stream lives (the server's own renewals failed past the lease,
and another worker took the event over).
"""

from __future__ import annotations

import asyncio
import logging

from inboxd_client.backoff import Backoff
from inboxd_client.errors import ClaimSuperseded, FailedPrecondition, InboxError, NotFound
from inboxd_client.fenced_calls import FencedCalls
from inboxd_client.finishing import Job, WorkerStats

log = logging.getLogger("inboxd_client.worker")

# Renewal answers that mean the claim is gone for good.
LOST_CLAIM_ERRORS = (ClaimSuperseded, NotFound, FailedPrecondition)
# Each renewal's deadline, as a fraction of the interval between renewals: a
# 30 s lease renews every 10 s, and gives each try 2.5 s. Short leases get at
# least MIN_DEADLINE (but never over half the interval): a busy loop answers
# late without having lost anything.
DEADLINE_FRACTION = 0.25
MIN_DEADLINE = 0.25
# The pause before trying a failed renewal again: it doubles up to the deadline.
RETRY_FIRST = 0.05


def renewal_interval(lease: float) -> float:
    """Seconds between renewals of a `lease`-second lease."""
    return lease / 3


def renewal_deadline(lease: float) -> float:
    """The deadline of one renewal of a `lease`-second lease."""
    interval = renewal_interval(lease)
    return max(interval * DEADLINE_FRACTION, min(interval / 2, MIN_DEADLINE))


async def keep_renewing(client: FencedCalls, job: Job, lease: float, stats: WorkerStats) -> None:
    """Renews `job`'s lease until cancelled, or until the server says the claim is gone (then interrupts it)."""
    event = job.context.event
    interval, deadline = renewal_interval(lease), renewal_deadline(lease)
    retry = Backoff(RETRY_FIRST, max(deadline, RETRY_FIRST))
    pause = interval
    while True:
        await asyncio.sleep(pause)
        try:
            await client.renew_lease(event, lease=lease, timeout=deadline)
        except LOST_CLAIM_ERRORS as exc:
            log.warning("lost the claim of %s/%s (%s): cancelling its handler", event.namespace, event.event_key, exc)
            job.interrupt(releasing=False)
            return
        except InboxError as exc:
            # The claim may well still be current (the token, not the clock,
            # is the fence): try again now, not an interval later.
            stats.renewal_failures += 1
            pause = retry.next()
            log.warning(
                "renewing the lease of %s/%s failed, trying again in %.2f s: %s",
                event.namespace,
                event.event_key,
                pause,
                exc,
            )
            continue
        stats.renewals += 1
        retry.reset()
        pause = interval
