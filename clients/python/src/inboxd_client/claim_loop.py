"""The unary Claim path: a worker's events claimed by Claims, for a server without the Work stream.

Completions ride the worker's next Claim (ClaimRequest.completions), so a
busy worker's cycle is one call: a handler's event is reported done only
once that Claim's answer says the server committed it, and its concurrency
slot stays taken until then. While a long-poll is out (or after a failed
Claim, or when stopping) they go as a CompleteBatch instead, so no
completion waits for a poll; a server that ignores a Claim's completions is
detected by its answer, and CompleteBatch is used from then on. Between
Claims the worker paces itself (`claim_backoff`): after a failure, after an
empty `wait=0` answer, and with a smaller batch after an answer too big to
receive.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Protocol

from inboxd_client.aio_client import AsyncInboxClient
from inboxd_client.claim_backoff import TRANSIENT_CLAIM_ERRORS, ClaimPacer
from inboxd_client.completions import CompletionBatcher, Pending
from inboxd_client.errors import claim_completion_outcomes
from inboxd_client.running_jobs import RunningJobs
from inboxd_client.v1 import inbox_pb2

# The worker's logger still: what it logs while claiming did not move with the code.
log = logging.getLogger("inboxd_client.worker")


class ClaimSettings(Protocol):
    """What a worker claims, for how long, and where its completions wait: a `Worker` has all of it."""

    client: AsyncInboxClient
    namespaces: list[str]
    event_types: list[str]
    lease: float
    wait: float
    worker_id: str
    completions: CompletionBatcher


class ClaimLoop:
    """Claims events for a worker's free slots until `stopping`, and hands each batch to `take`."""

    def __init__(
        self,
        of: ClaimSettings,
        jobs: RunningJobs,
        pacer: ClaimPacer,
        stopping: asyncio.Event,
        take: Callable[[int, Sequence[inbox_pb2.ClaimedEvent]], None],
    ) -> None:
        self._of = of
        self._jobs = jobs
        self._pacer = pacer
        self._stopping = stopping
        self._take = take
        # Whether the server commits a Claim's completions: unknown (None) until a Claim carried some.
        self._carries: bool | None = None

    async def run(self) -> None:
        """Claims and starts events until stopping."""
        try:
            while not self._stopping.is_set():
                carrying = self._carries is not False
                self._of.completions.hold_for_claims(carrying)
                if carrying and self._of.completions.waiting:
                    if not self._of.completions.due.is_set():
                        # At most the completion window: then they ride the Claim below.
                        await self._until(self._of.completions.due)
                        continue
                    claiming = self._claim_carrying(self._of.completions.take())
                else:
                    free = self._jobs.free()
                    if free <= 0:
                        self._jobs.slot_freed.clear()
                        await self._until(self._jobs.slot_freed, also=self._of.completions.due)
                        continue
                    # A long-poll would keep completions waiting: while it is out, they go as a CompleteBatch.
                    self._of.completions.hold_for_claims(carrying and self._of.wait == 0)
                    claiming = self._poll(free)
                try:
                    events = await claiming
                except TRANSIENT_CLAIM_ERRORS as exc:
                    self._of.completions.hold_for_claims(False)
                    await self._until(self._stopping, self._pacer.failed(exc))
                    continue
                if events is None:
                    continue  # no slot for a Claim after all: its completions went as a CompleteBatch
                self._take(0, events)
                # After an empty Claim a long-polling worker's next one waits at
                # the server; a wait=0 worker's cannot, so it waits here, unless
                # completions come due (they ride the next Claim).
                pause = self._pacer.answered(len(events), long_polls=self._of.wait > 0)
                if pause:
                    await self._until(self._of.completions.due, pause)
        finally:
            self._of.completions.hold_for_claims(False)

    def _claim(
        self, free: int, wait: float, completions: Sequence[inbox_pb2.CompleteRequest] = ()
    ) -> Coroutine[Any, Any, inbox_pb2.ClaimResponse]:
        """This worker's Claim for up to `free` events (at most a Claim's limit), carrying `completions`."""
        return self._of.client.claim(
            namespaces=self._of.namespaces,
            event_types=self._of.event_types,
            max_events=self._pacer.max_events(free),
            lease=self._of.lease,
            wait=wait,
            worker_id=self._of.worker_id,
            completions=completions,
        )

    async def _claim_carrying(self, carried: list[Pending]) -> list[inbox_pb2.ClaimedEvent] | None:
        """A Claim that first commits `carried`: the worker's cycle in one call instead of two.

        A completion holds its event's concurrency slot until the server has
        answered for it, as a CompleteBatch's would; but the server commits a
        Claim's completions before it leases anything, so this Claim may ask
        for their slots too without the worker ever holding more than
        `concurrency` leased events. It never long-polls: the handlers whose
        events these are wait for the answer. None: no slot for a Claim, so none was sent.
        """
        free = self._jobs.free() + len(carried)
        if free < 1:
            self._of.completions.send(carried)
            return None
        try:
            answer = await self._claim(free, 0, [request for request, _ in carried])
        except BaseException:
            # In doubt: the server may have committed them or not. Sent again
            # (as a CompleteBatch, with its retries), a committed one answers OK.
            self._of.completions.send(carried)
            raise
        events = list(answer.events)
        if len(answer.completion_results) != len(carried):
            # A server older than ClaimRequest.completions ignored them: complete them as before, from now on.
            log.info("the server does not commit a Claim's completions: sending them as CompleteBatch")
            self._carries = False
            self._of.completions.send(carried)
            allowed = max(self._jobs.free(), 0)
            for event in events[allowed:]:
                self._jobs.release(event)  # it leased into the slots of the completions it ignored
            return events[:allowed]
        self._carries = True
        self._of.completions.answer(carried, claim_completion_outcomes(answer, len(carried)))
        return events

    async def _until(
        self, event: asyncio.Event, seconds: float | None = None, *, also: asyncio.Event | None = None
    ) -> None:
        """Waits for `event` (or `also`) or for stopping, whichever comes first (or `seconds`)."""
        events = [event, self._stopping] if also is None else [event, also, self._stopping]
        waiters = {asyncio.ensure_future(e.wait()) for e in events}
        try:
            await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()

    async def _poll(self, free: int) -> list[inbox_pb2.ClaimedEvent]:
        claim = asyncio.ensure_future(self._claim(free, self._of.wait))
        stopping = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({claim, stopping}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            claim.cancel()
            raise
        finally:
            stopping.cancel()
        if not claim.done():
            # Stopping: abandon the long-poll rather than wait it out. The
            # server hands back whatever a Claim cancelled mid-way had taken,
            # attempts uncounted; a claim that answered meanwhile is released.
            claim.cancel()
            await asyncio.wait({claim})
        if claim.cancelled():
            return []
        return list(claim.result().events)
