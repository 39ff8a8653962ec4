"""Bulk operations' pace sleeps, cut short by a cancel: at once in this process, within a look from another.

A carrier sleeps between chunks to keep its operation's rate, up to ten
seconds at the slowest. A cancel lands in the database at once, but a
carrier asleep would hold on to its operation (its lock, its task) until
it woke. So each sleep ends early when its operation is cancelled: a cancel
made in this process wakes it directly (`cancelled`), and one made on
another replica is seen by one watcher per runner, which asks every
LOOK_SECONDS, in one statement for all the operations asleep here, which of
them have ended. Nothing is asked while none sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable

from inboxd.domain.errors import InboxError

log = logging.getLogger(__name__)

# How often the watcher looks for operations ended on another replica while some sleep here.
LOOK_SECONDS = 0.5

Sleep = Callable[[float], Awaitable[None]]
Ended = Callable[[list[uuid.UUID]], Awaitable[list[uuid.UUID]]]


class PaceSleeps:
    """The pace sleeps of one runner's carriers, and the watcher that ends those whose operation ended."""

    def __init__(self, ended: Ended, sleep: Sleep = asyncio.sleep, *, look_seconds: float = LOOK_SECONDS) -> None:
        self._ended = ended
        self._sleep = sleep
        self._look_seconds = look_seconds
        self._wakes: dict[uuid.UUID, asyncio.Event] = {}
        self._watcher: asyncio.Task[None] | None = None

    def cancelled(self, op: uuid.UUID) -> None:
        """Told of a cancel made in this process: the operation's sleep, if it sleeps here, ends now."""
        if (wake := self._wakes.get(op)) is not None:
            wake.set()

    async def sleep(self, op: uuid.UUID, seconds: float) -> None:
        """Sleeps `seconds`, or less: until the operation is ended (its next chunk then finds it so)."""
        wake = self._wakes[op] = asyncio.Event()
        if self._watcher is None:
            self._watcher = asyncio.create_task(self._watch(), name="bulk pace watcher")
        waking = asyncio.ensure_future(wake.wait())
        sleeping = asyncio.ensure_future(self._sleep(seconds))
        try:
            await asyncio.wait((waking, sleeping), return_when=asyncio.FIRST_COMPLETED)
        finally:
            waking.cancel()
            sleeping.cancel()
            if self._wakes.get(op) is wake:
                del self._wakes[op]

    async def stop(self) -> None:
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self._look_seconds)
            if not self._wakes:
                # No await between this look and the sleep that registers next: that one starts a new watcher.
                self._watcher = None
                return
            try:
                ended = await self._ended(list(self._wakes))
            except InboxError as exc:  # an outage: the sleeps end on their own, and the next look tries again
                log.debug("bulk operations asleep here not looked at: %s", exc)
                continue
            for op in ended:
                self.cancelled(op)
