"""The open streams of one server process, by caller: at most so many each, and judged again on every reload.

A stream is admitted once, on its metadata (`api.admission`), and then lives
for as long as its connection (up to `INBOXD_CONNECTION_AGE`). So two
things are decided here, for AcceptStream and Work alike, that a unary call
never needs:

- **How many.** One caller (tokens-file entry) holds at most
  `INBOXD_MAX_STREAMS_PER_CALLER` open streams of each kind in a process, as
  it holds at most `INBOXD_MAX_WAITING_CLAIMS_PER_CALLER` long-polls: one
  more is RESOURCE_EXHAUSTED. Every open Work stream is a waiter on the wake
  bus and a claim statement per wake-up, so a token must not hold thousands.
- **Whether it still may.** A reload of the tokens file (SIGHUP) judges every
  open stream's token again, as the console re-authenticates its sessions:
  a token no longer in the file ends its streams UNAUTHENTICATED, one that
  lost the stream's scope PERMISSION_DENIED. One whose namespace grants
  narrowed ends UNAVAILABLE, to be opened again and judged by the grants in
  force (a subscription that named no namespace took the old grants as its
  filter); grants that stayed or widened change nothing, since the stream's
  old caller allows no more than the new one.

A stream ends through its requests: the next read raises the verdict, and a
read under way is cancelled and raises it too. Both stream kinds end on an
error of their request iterator as on any other (a Work stream then hands
on the events it holds, at once, as any ended stream does), and a Work
stream still waiting for its subscription ends in the handler itself.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

from inboxd.config.tokens import Caller, Scope, TokenRegistry
from inboxd.domain.errors import InboxError, PermissionDenied, TooManyRequests, Unauthenticated, Unavailable
from inboxd.domain.namespace_patterns import glob_within_any

# The words a refusal names each stream kind by.
_KINDS = {"Work": "Work streams", "AcceptStream": "AcceptStreams"}


class LiveStream:
    """One open stream: its caller as admitted, and its verdict once a reload ended it."""

    def __init__(self, method: str, scope: Scope, caller: Caller) -> None:
        self.method = method
        self.scope = scope
        self.caller = caller
        self.ended: InboxError | None = None
        # The task awaiting the stream's next message, while one does.
        self._reading: asyncio.Task[Any] | None = None

    def requests(self, requests: AsyncIterable[Any]) -> AsyncIterator[Any]:
        """`requests` as the stream reads them, ending with the verdict once there is one."""
        return _Requests(self, requests.__aiter__())

    def end(self, verdict: InboxError) -> None:
        """Ends the stream with `verdict`: its read under way raises it, or its next one does."""
        if self.ended is not None:
            return
        self.ended = verdict
        if self._reading is not None:
            self._reading.cancel()

    def judge(self, registry: TokenRegistry) -> InboxError | None:
        """Why the stream may no longer go on under the tokens now in force, or None."""
        name, kind = self.caller.name, _KINDS.get(self.method, self.method)
        now = registry.current(self.caller)
        if now is None:
            return Unauthenticated(f"token {name!r} was revoked (no longer in the tokens file): its {kind} end")
        if self.scope not in now.scopes:
            return PermissionDenied(f"token {name!r} no longer holds the {self.scope.value!r} scope: its {kind} end")
        lost = [grant for grant in self.caller.namespaces if not glob_within_any(grant, now.namespaces)]
        if lost:
            return Unavailable(
                f"token {name!r} is no longer granted {lost[0]!r}: its {kind} end; open them again to be "
                "judged by the grants now in force"
            )
        return None


class _Requests:
    """A stream's request iterator that raises the stream's verdict, even from a read already waiting."""

    def __init__(self, stream: LiveStream, requests: AsyncIterator[Any]) -> None:
        self._stream = stream
        self._requests = requests

    def __aiter__(self) -> _Requests:
        return self

    async def __anext__(self) -> Any:
        stream = self._stream
        if stream.ended is not None:
            raise stream.ended
        task = asyncio.current_task()
        stream._reading = task
        try:
            return await self._requests.__anext__()
        except asyncio.CancelledError:
            # Cancelled by end(): the read's task goes on, and meets the verdict as any error of its requests.
            if stream.ended is None or task is None or task.cancelling() != 1:
                raise
            task.uncancel()
            raise stream.ended from None
        finally:
            stream._reading = None


class LiveStreams:
    """The open streams of one process, counted by (method, caller name); `judge` runs on every reload."""

    def __init__(self, most_per_caller: int | None, registry: TokenRegistry | None) -> None:
        self._most = most_per_caller
        self._open: dict[LiveStream, None] = {}
        self._counts: Counter[tuple[str, str]] = Counter()
        if registry is not None:
            registry.on_reload(self.judge)

    def __len__(self) -> int:
        return len(self._open)

    def open(self, method: str, scope: Scope, caller: Caller) -> LiveStream:
        """A new stream of `caller`; raises TooManyRequests when it already holds the most it may."""
        key = (method, caller.name)
        if self._most is not None and self._counts[key] >= self._most:
            kind = _KINDS.get(method, method)
            raise TooManyRequests(
                f"{caller.name!r} already holds {self._most} open {kind} in this server process "
                f"(INBOXD_MAX_STREAMS_PER_CALLER): close one, or share streams"
            )
        self._counts[key] += 1
        stream = LiveStream(method, scope, caller)
        self._open[stream] = None
        return stream

    def close(self, stream: LiveStream) -> None:
        if self._open.pop(stream, False) is None:
            key = (stream.method, stream.caller.name)
            self._counts[key] -= 1
            if not self._counts[key]:
                del self._counts[key]

    def judge(self, registry: TokenRegistry) -> None:
        """The tokens file was reloaded: ends every open stream whose token no longer allows it."""
        for stream in list(self._open):
            verdict = stream.judge(registry)
            if verdict is not None:
                stream.end(verdict)
