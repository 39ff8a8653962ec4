"""Waking long-polling Claims when work arrives, without polling the database.

A waiter registers *before* it looks for work, so an event that arrives
between its empty look and its wait still wakes it. Each arriving event
wakes at most one matching waiter (the longest waiting), so a thousand idle
workers do not stampede the database for one event.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(eq=False)
class Waiter:
    namespaces: frozenset[str]
    event_types: frozenset[str]
    woken: asyncio.Event = field(default_factory=asyncio.Event)

    def wants(self, namespace: str, event_type: str) -> bool:
        return (not self.namespaces or namespace in self.namespaces) and (
            not self.event_types or event_type in self.event_types
        )


class WakeBus:
    """The waiters of one server process, oldest first."""

    def __init__(self) -> None:
        # A dict keeps insertion order and removes in O(1).
        self._waiters: dict[Waiter, None] = {}

    def __len__(self) -> int:
        return len(self._waiters)

    def register(self, namespaces: Iterable[str], event_types: Iterable[str]) -> Waiter:
        waiter = Waiter(frozenset(namespaces), frozenset(event_types))
        self._waiters[waiter] = None
        return waiter

    def unregister(self, waiter: Waiter) -> None:
        self._waiters.pop(waiter, None)

    def notify(self, namespace: str, event_type: str, count: int = 1) -> int:
        """Wakes up to `count` waiters that want this kind of event; returns how many."""
        woken = 0
        for waiter in self._waiters:
            if woken >= count:
                break
            if not waiter.woken.is_set() and waiter.wants(namespace, event_type):
                waiter.woken.set()
                woken += 1
        return woken

    def notify_all(self) -> None:
        """After a possible loss of signals (a reconnect, say), everyone looks again."""
        for waiter in self._waiters:
            waiter.woken.set()
