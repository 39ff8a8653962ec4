"""Backoff: an exponential pause, shared by the worker's renewals and its claiming."""

from __future__ import annotations


class Backoff:
    """An exponential pause: the first, then doubled each time up to a cap, and the first again after reset()."""

    def __init__(self, first: float, cap: float) -> None:
        if not 0 < first <= cap:
            raise ValueError(f"first={first}, cap={cap}: needs 0 < first <= cap")
        self.first = first
        self.cap = cap
        self._next = first

    def next(self) -> float:
        """The pause to take now; the one after it is twice as long (at most the cap)."""
        pause = self._next
        self._next = min(pause * 2, self.cap)
        return pause

    def reset(self) -> None:
        self._next = self.first
