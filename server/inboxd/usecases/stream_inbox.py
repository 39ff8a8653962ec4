"""What a Work stream asks of the Inbox: the Claim path, the clock and the database, whom to wake, how to give back.

The streams (streams.py, live_streams.py) sit below the Inbox, which holds
their registry: they are given an Inbox through this description rather
than importing usecases.inbox, so the Inbox and its streams import in one
direction only (inbox -> live_streams -> streams -> here).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Protocol

from inboxd.config.settings import Settings
from inboxd.domain.vocabulary import ClaimBatch, ClaimRequest, Fence
from inboxd.observability.transition_observer import InboxObserver
from inboxd.runtime.wakeups import WakeUp
from inboxd.store.database import Database


class StreamInbox(Protocol):
    """The Inbox (usecases.inbox.Inbox) as its Work streams use it."""

    @property
    def db(self) -> Database: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def clock(self) -> Callable[[], datetime | None]: ...

    @property
    def observer(self) -> InboxObserver: ...

    @property
    def fallback_poll_seconds(self) -> float: ...

    async def _claim_when_due(
        self,
        namespaces: Sequence[str],
        event_types: Sequence[str],
        namespace_patterns: Sequence[str],
        look: Callable[[WakeUp | None], Awaitable[ClaimBatch]],
        deadline: float | None,
    ) -> ClaimBatch: ...

    async def _claim_once(self, request: ClaimRequest) -> ClaimBatch: ...

    def wake_claimers(self, counts: Mapping[tuple[str, str], int]) -> None: ...

    def wake_next_of_keys(self, finished: Sequence[tuple[str, str]]) -> None: ...

    async def release_many(self, fences: Sequence[Fence]) -> int: ...
