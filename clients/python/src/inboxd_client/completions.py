"""Completions that finish together go out together: in the worker's next Claim, or one CompleteBatch.

A worker's handlers finish at their own pace, but under load many finish
within a few milliseconds of each other. `CompletionBatcher.complete` looks
like `client.complete` to its caller (it returns once the server has
committed that item, or raises that item's own error), while the items that
arrive within `window` seconds, up to `max_items`, share one call. One item's
refusal (a stale claim, say) is raised to its own caller only.

The shared call is the worker's next Claim when its claim loop is ready to
send one at once (`hold_for_claims(True)`): the loop `take`s the due items,
carries them, and hands their results to `answer`. Otherwise (the loop is
long-polling, backing off or stopping) the items go out as a CompleteBatch
when the window closes, since a long-poll would keep them waiting.

A completion made under a span (a worker's `process` span) goes out under
it when it goes alone, so the server's span for it is that span's child;
a batch of several goes out under none, having no one parent (a Claim that
carries completions is the claim loop's call, under its own context).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Coroutine, Sequence
from typing import Any

from inboxd_client import builders
from inboxd_client.builders import Fenced
from inboxd_client.errors import InboxError, Unavailable, Unimplemented
from inboxd_client.fenced_calls import FencedCalls
from inboxd_client.trace_propagation import span_is_current
from inboxd_client.v1 import inbox_pb2, types_pb2

log = logging.getLogger(__name__)

DEFAULT_WINDOW = 0.002
DEFAULT_MAX_ITEMS = 100
MAX_ITEMS = 500  # the server's limit per CompleteBatch, and per Claim's completions

Pending = tuple[inbox_pb2.CompleteRequest, "asyncio.Future[None]"]


class CompletionBatcher:
    """Collects completions for `window` seconds (or `max_items`), then sends them in a Claim or a CompleteBatch."""

    def __init__(
        self, client: FencedCalls, *, window: float = DEFAULT_WINDOW, max_items: int = DEFAULT_MAX_ITEMS
    ) -> None:
        if window < 0:
            raise ValueError(f"window={window}: cannot be negative")
        if not 1 <= max_items <= MAX_ITEMS:
            raise ValueError(f"max_items={max_items}: the server takes 1 to {MAX_ITEMS} per CompleteBatch")
        self.client = client
        self.window = window
        self.max_items = max_items
        self.calls = 0  # CompleteBatch calls sent, for tests and logs
        self.carried = 0  # completions taken to ride a Claim, for tests and logs
        # Set while due items wait for the claim loop to take them.
        self.due = asyncio.Event()
        self._pending: list[Pending] = []
        self._timer: asyncio.TimerHandle | None = None
        self._sending: set[asyncio.Task[None]] = set()
        self._held = False
        # An older server without CompleteBatch: fall back to one Complete per item.
        self._one_by_one = False
        # The caller's context of each waiting completion made under a valid span (none when nothing traces).
        self._contexts: dict[asyncio.Future[None], contextvars.Context] = {}

    @property
    def waiting(self) -> int:
        """How many completions wait for their batch to be sent."""
        return len(self._pending)

    async def complete(
        self,
        event: Fenced,
        *,
        disposition: types_pb2.Disposition = types_pb2.DISPOSITION_APPLIED,
        reason: str = "",
    ) -> None:
        """Completes the event with the next batch; raises its own error (ClaimSuperseded ...) like Complete."""
        request = builders.complete_request(event, disposition, reason)
        if self._one_by_one:
            await self.client.complete(request, disposition=disposition, reason=reason)
            return
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._pending.append((request, done))
        traced = span_is_current()
        if traced:
            self._contexts[done] = contextvars.copy_context()
        if len(self._pending) >= self.max_items:
            self._window_closed()
        elif self._timer is None and not self.due.is_set():
            self._timer = loop.call_later(self.window, self._window_closed)
        try:
            await done
        finally:
            if traced:
                self._contexts.pop(done, None)

    def hold_for_claims(self, held: bool) -> None:
        """Whether due items wait for the claim loop (`take`) rather than go out as a CompleteBatch."""
        self._held = held
        if not held and self.due.is_set():
            self.flush()

    def take(self) -> list[Pending]:
        """Up to `max_items` waiting completions (due or not), for a Claim to carry; `answer` settles them."""
        taken, self._pending = self._pending[: self.max_items], self._pending[self.max_items :]
        if not self._pending:
            self._cancel_timer()
            self.due.clear()
        self.carried += len(taken)
        return taken

    def flush(self) -> None:
        """Sends every waiting completion now, as one CompleteBatch (or more, `max_items` each)."""
        self._cancel_timer()
        self.due.clear()
        batch, self._pending = self._pending, []
        for start in range(0, len(batch), self.max_items):
            self.send(batch[start : start + self.max_items])

    def send(self, batch: Sequence[Pending]) -> None:
        """Sends these completions as one CompleteBatch: taken ones a Claim could not settle, say."""
        if batch:
            contexts = [self._contexts.pop(done, None) for _, done in batch]
            if not any(contexts):
                self._track(self._send(list(batch)))
                return
            # Alone: under its caller's span. Several: under none, rather than the first caller's.
            only = contexts[0] if len(contexts) == 1 else None
            self._track(self._send(list(batch)), context=only or contextvars.Context())

    def answer(self, batch: Sequence[Pending], outcomes: Sequence[InboxError | None]) -> None:
        """Settles each carried completion with its outcome in the Claim's answer."""
        self._track(self._answer(list(batch), outcomes))

    def _window_closed(self) -> None:
        self._cancel_timer()
        if self._held:
            self.due.set()  # the claim loop takes them into its next Claim
        else:
            self.flush()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _track(self, sending: Coroutine[Any, Any, None], context: contextvars.Context | None = None) -> None:
        task = asyncio.create_task(sending, context=context)
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send(self, batch: list[Pending]) -> None:
        self.calls += 1
        try:
            outcomes = await self.client.complete_many([request for request, _ in batch])
        except Unimplemented:
            log.info("the server has no CompleteBatch: completing one event per call")
            self._one_by_one = True
            await asyncio.gather(*(self._alone(request, done) for request, done in batch))
            return
        except InboxError as exc:
            for _, done in batch:
                _settle(done, type(exc)(exc.details, method=exc.method))
            return
        except BaseException as exc:
            for _, done in batch:
                _settle(done, Unavailable(f"CompleteBatch did not finish: {exc!r}"))
            raise
        await self._answer(batch, outcomes)

    async def _answer(self, batch: list[Pending], outcomes: Sequence[InboxError | None]) -> None:
        retries = []
        for (request, done), outcome in zip(batch, outcomes, strict=True):
            if isinstance(outcome, Unavailable):
                # Nothing changed for that item (its row was held, say): a lone
                # Complete retries it with the client's retry policy.
                retries.append(self._alone(request, done))
            else:
                _settle(done, outcome)
        if retries:
            await asyncio.gather(*retries)

    async def _alone(self, request: inbox_pb2.CompleteRequest, done: asyncio.Future[None]) -> None:
        try:
            await self.client.complete(request, disposition=request.disposition, reason=request.reason)
        except InboxError as exc:
            _settle(done, exc)
        else:
            _settle(done, None)


def _settle(done: asyncio.Future[None], error: InboxError | None) -> None:
    if done.done():
        return  # its caller went away
    if error is None:
        done.set_result(None)
    else:
        done.set_exception(error)
