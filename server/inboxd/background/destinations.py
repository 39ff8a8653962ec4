"""The destinations runner: inboxd's own worker, which claims each destination's events and POSTs them.

Every inboxd instance runs one (with the other instance duties). It claims
through the ordinary claim path, so fencing, ordering keys, flow control
and attempts apply unchanged, and several replicas share a destination's
events as several workers would. The lease is the POST's timeout and a
margin as long (at least 5 s), so a claim outlives its request: the answer
completes or fails the event under the claim that sent it, and a process
that lost its claim (SIGKILLed, partitioned past its lease) is fenced: its
Complete gets ABORTED, recorded as a "fenced" attempt, never a completion.

What an answer does (domain/destinations.py, `verdict`): 2xx completes;
no answer, 5xx, 408, 409 and a redirect (never followed) fail with the
destination's backoff (or the server's); 429 fails with its Retry-After;
any other 4xx dead-letters at once, its status and the start of its body
kept in last_error. Each attempt is recorded with its outcome.

The circuit breaker lives in the destination's row: after BREAKER_THRESHOLD
failures in a row the destination is paused, with the reason, and nothing
more is claimed for it (its events wait PENDING, no attempt spent). When
its next try is due and an event is, one replica takes the try (store: destination_take_try),
claims one event and POSTs it; an answer from the endpoint closes the
breaker, another failure doubles the wait up to BREAKER_LONGEST_TRY.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from inboxd.background.http_delivery import HttpSender, PostResult
from inboxd.domain.backoff import BackoffPolicy
from inboxd.domain.destination_addresses import AllowList
from inboxd.domain.destinations import (
    DeliveryAttempt,
    Destination,
    DestinationState,
    Verdict,
    breaker_reason,
    delivery_headers,
    endpoint_failed,
    retry_after,
    verdict,
    webhook_id,
)
from inboxd.domain.errors import ClaimSuperseded, DatabaseFault, InboxError, Unavailable
from inboxd.domain.namespace_patterns import grant_to_like, is_glob
from inboxd.domain.vocabulary import ClaimedEvent, ClaimRequest, Disposition, EventState, Fence
from inboxd.observability.destination_gauges import DestinationMetrics
from inboxd.usecases.admin import Operators

log = logging.getLogger(__name__)

# How long one Claim of a deliverer waits for events before it looks at its destination again.
CLAIM_WAIT = timedelta(seconds=2)
# The longest a stopping runner waits for its POSTs in flight (at most INBOXD_SHUTDOWN_GRACE).
STOP_GRACE_SECONDS = 5.0
# A deliverer whose claim failed (the database is down) waits this long before claiming again.
CLAIM_RETRY_SECONDS = 1.0


def _error_text(result: PostResult) -> str:
    if result.status is None:
        return result.error
    body = result.excerpt[:200].decode("utf-8", "replace")
    words = f"HTTP {result.status}"
    if result.location:
        words += f" (redirect to {result.location} not followed)"
    return f"{words}: {body}" if body else words


class DestinationsRunner:
    """Starts a deliverer per active destination, and a try per paused one whose try is due."""

    def __init__(
        self,
        operators: Operators,
        metrics: DestinationMetrics | None = None,
        *,
        poll_seconds: float | None = None,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.operators = operators
        self.inbox = operators.inbox
        self.metrics = metrics
        settings = self.inbox.settings
        self.poll_seconds = settings.destinations_poll.total_seconds() if poll_seconds is None else poll_seconds
        self.sender = HttpSender(AllowList.parse(settings.destinations_allow))
        self._wall_clock = wall_clock
        # The latest row of each destination, as the last look read it (a deliverer reads its own here).
        self.known: dict[str, Destination] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        # How long a stopping runner lets its POSTs in flight be answered (the rest are released).
        self.stop_grace = min(settings.shutdown_grace.total_seconds(), STOP_GRACE_SECONDS)

    def _now(self) -> datetime:
        return self.inbox.clock() or self._wall_clock()

    async def run_forever(self) -> None:
        if self.poll_seconds <= 0:
            log.info("destinations runner off (INBOXD_DESTINATIONS_POLL=0): other replicas deliver")
            return
        try:
            while True:
                await self.look_once()
                await asyncio.sleep(self.poll_seconds)
        finally:
            await self.stop()

    async def look_once(self) -> None:
        try:
            every = await self.operators.all_destinations()
        except (Unavailable, DatabaseFault) as exc:
            log.warning("destinations not looked at: %s", exc)
            return
        self.known = {d.name: d for d in every}
        if self.metrics is not None:
            self.metrics.breakers.update(every)
        # A deleted destination's deliverer sees it gone at its next turn and ends once its POSTs in flight
        # have their answers (never cut off mid-POST); its task is forgotten here when it ends.
        for name in [n for n, task in self._tasks.items() if task.done()]:
            del self._tasks[name]
        for destination in every:
            task = self._tasks.get(destination.name)
            if task is not None and not task.done():
                continue
            if destination.state is DestinationState.ACTIVE:
                self._start(destination.name, self._deliver_while_active(destination.name))
            elif destination.next_try_at is not None and destination.next_try_at <= self._now():
                self._start(destination.name, self._try_once(destination))

    def _start(self, name: str, work: object) -> None:
        assert asyncio.iscoroutine(work)
        task = asyncio.create_task(work, name=f"destination {name}")
        task.add_done_callback(_log_failure)
        self._tasks[name] = task

    async def stop(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.sender.close()

    def _claim_request(self, destination: Destination, max_events: int, wait: timedelta) -> ClaimRequest:
        pattern = destination.spec.namespace_pattern
        globbed = is_glob(pattern)
        return ClaimRequest(
            namespaces=() if globbed else (pattern,),
            event_types=(),
            max_events=max_events,
            lease=destination.lease,
            wait=wait,
            worker_id=f"destination/{destination.name}",
            namespace_patterns=(grant_to_like(pattern),) if globbed else (),
        )

    async def _deliver_while_active(self, name: str) -> None:
        """Claims and POSTs, up to the destination's concurrency at once, while it stays known and ACTIVE."""
        in_flight: dict[asyncio.Task[str], ClaimedEvent] = {}
        try:
            while (destination := self.known.get(name)) is not None and destination.state is DestinationState.ACTIVE:
                free = destination.spec.concurrency - len(in_flight)
                if free <= 0:
                    await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
                    continue
                try:
                    batch = await self.inbox.claim(self._claim_request(destination, free, CLAIM_WAIT))
                except (Unavailable, DatabaseFault) as exc:
                    log.warning("destination %s: claim failed, again in %.0f s: %s", name, CLAIM_RETRY_SECONDS, exc)
                    await asyncio.sleep(CLAIM_RETRY_SECONDS)
                    continue
                for event in batch.events:
                    task = asyncio.create_task(self.deliver(destination, event))
                    task.add_done_callback(_log_failure)
                    in_flight[task] = event
                    task.add_done_callback(lambda done: in_flight.pop(done, None))
        except asyncio.CancelledError:
            await self._stop_delivering(name, in_flight)
            raise
        # Deleted or paused: the POSTs in flight finish, each ending its claim as its answer says.
        if in_flight:
            await asyncio.gather(*in_flight, return_exceptions=True)

    async def _stop_delivering(self, name: str, in_flight: dict[asyncio.Task[str], ClaimedEvent]) -> None:
        """The server stops: the POSTs in flight get STOP_GRACE_SECONDS to be answered; the rest are released.

        A POST cut off may have reached the endpoint: its event goes again at
        once elsewhere, with the same webhook-id, and its attempt given back.
        """
        held = dict(in_flight)  # the done callbacks empty `in_flight` as tasks end
        if not held:
            return
        _, cut = await asyncio.wait(list(held), timeout=self.stop_grace)
        for task in cut:
            task.cancel()
        for task in cut:
            event = held[task]
            with contextlib.suppress(asyncio.CancelledError, InboxError):
                await task
            with contextlib.suppress(InboxError):
                await self.inbox.release(Fence(event.namespace, event.event_key, event.claim_token))
        if cut:
            log.info("destination %s: %d POSTs cut off by the stop; their events were released", name, len(cut))

    async def _try_once(self, destination: Destination) -> None:
        """The breaker's try: one event due, claimed, then the try taken (by one replica) and the event POSTed.

        With no event due (those that failed wait out their backoff) the
        breaker stays open and nothing is written: the next look claims again.
        An event claimed by a replica that finds the try taken by another is
        released, its attempt given back.
        """
        batch = await self.inbox.claim(self._claim_request(destination, 1, timedelta(0)))
        if not batch.events:
            return
        event = batch.events[0]
        if not await self.operators.take_destination_try(destination.name, destination.lease + timedelta(seconds=5)):
            with contextlib.suppress(InboxError):
                await self.inbox.release(Fence(event.namespace, event.event_key, event.claim_token))
            return
        await self.deliver(destination, event)

    async def deliver(self, destination: Destination, event: ClaimedEvent) -> str:
        """POSTs one claimed event and ends its claim as the answer says; answers the attempt's outcome."""
        spec = destination.spec
        headers = delivery_headers(
            spec, namespace=event.namespace, event_key=event.event_key, event_type=event.event_type,
            attempt=event.attempt, content_type=event.content_type, body=event.payload,
            metadata=event.metadata, now=self._wall_clock(),
        )  # fmt: skip
        attempted_at = self._now()
        result = await self.sender.post(spec.url, event.payload, headers, spec.timeout)
        outcome = await self._settle(destination, event, result)
        attempt = DeliveryAttempt(
            destination=destination.name, namespace=event.namespace, event_key=event.event_key,
            webhook_id=webhook_id(event.namespace, event.event_key), attempt=event.attempt,
            fencing_token=event.fencing_token, attempted_at=attempted_at, status_code=result.status or 0,
            latency=result.latency, error=_error_text(result) if verdict(result.status) is not Verdict.COMPLETE else "",
            response_excerpt=result.excerpt, outcome=outcome,
        )  # fmt: skip
        try:
            await self.operators.record_delivery(attempt)
            await self._judge_endpoint(destination, result)
        except InboxError as exc:
            log.warning("destination %s: attempt on %s not recorded: %s", destination.name, event.event_key, exc)
        if self.metrics is not None:
            self.metrics.deliveries.labels(destination.name, outcome).inc()
        return outcome

    async def _settle(self, destination: Destination, event: ClaimedEvent, result: PostResult) -> str:
        fence = Fence(event.namespace, event.event_key, event.claim_token)
        judged = verdict(result.status)
        try:
            if judged is Verdict.COMPLETE:
                await self.inbox.complete(fence, Disposition.APPLIED, "")
                return Verdict.COMPLETE.value
            spec = destination.spec
            permanent = judged is Verdict.DEAD_LETTER or 0 < spec.max_attempts <= event.attempt
            delay = retry_after(result.retry_after, self._now()) if result.status == 429 else None
            if delay is None and spec.backoff_base:
                delay = BackoffPolicy(spec.backoff_base, 2.0, spec.backoff_cap).delay(event.attempt)
            failed = await self.inbox.fail(fence, _error_text(result), permanent=permanent, retry_after=delay)
        except ClaimSuperseded:
            log.info("destination %s: %s's claim was taken over; its answer is not used", destination.name,
                     event.event_key)  # fmt: skip
            return "fenced"
        except InboxError as exc:
            log.warning("destination %s: %s not settled (its lease will end it): %s", destination.name,
                        event.event_key, exc)  # fmt: skip
            return "fenced"
        return Verdict.DEAD_LETTER.value if failed.state is EventState.DEAD_LETTERED else Verdict.RETRY.value

    async def _judge_endpoint(self, destination: Destination, result: PostResult) -> None:
        """Feeds the breaker: a failure counts, an answer closes it (written only when something was counted)."""
        name = destination.name
        known = self.known.get(name, destination)
        if endpoint_failed(result.status):
            state = await self.operators.destination_failed(name, breaker_reason(known.consecutive_failures + 1,
                                                                                 _error_text(result)))  # fmt: skip
            if state is not None:
                self.known[name] = _with(known, state[0], state[1], known.consecutive_failures + 1)
                if state[0] is DestinationState.PAUSED and known.state is DestinationState.ACTIVE:
                    log.warning("destination %s: breaker open until %s: %s", name, state[1], _error_text(result))
        elif known.consecutive_failures or known.state is DestinationState.PAUSED:
            if await self.operators.destination_answered(name):
                log.info("destination %s: the endpoint answered; breaker closed", name)
            self.known[name] = _with(known, DestinationState.ACTIVE, None, 0)


def _with(d: Destination, state: DestinationState, next_try_at: datetime | None, failures: int) -> Destination:
    return Destination(d.spec, state, d.paused_reason, next_try_at, failures, d.created_at, d.created_by)


def _log_failure(task: asyncio.Task[Any]) -> None:
    """A deliverer, a try or a POST that died of something unforeseen: logged (the next look starts another)."""
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.error("%s stopped: %s", task.get_name(), exc, exc_info=exc)
