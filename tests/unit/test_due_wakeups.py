"""Wake-ups held until their events come due, with no database."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import pytest

from inboxd.domain.vocabulary import AcceptOutcome, AcceptResult, EventKey, EventState, Namespace, NewEvent
from inboxd.runtime import claimable
from inboxd.runtime.claimable import DueWakeUps, keyed_token


class Told:
    """What a DueWakeUps told, and a signal for each telling."""

    def __init__(self) -> None:
        self.wakes: list[dict[tuple[str, str], int]] = []
        self.changed = asyncio.Event()

    def __call__(self, counts: Mapping[tuple[str, str], int]) -> None:
        self.wakes.append(dict(counts))
        self.changed.set()

    async def next(self) -> dict[tuple[str, str], int]:
        seen = len(self.wakes)
        while len(self.wakes) == seen:
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), 5)
        return self.wakes[seen]


async def test_a_delay_that_has_passed_wakes_at_once() -> None:
    told = Told()
    DueWakeUps(told).after(timedelta(0), "ns", "t")
    assert told.wakes == [{("ns", "t"): 1}]


async def test_events_coming_due_together_are_one_wake_up_of_their_count() -> None:
    told = Told()
    later = DueWakeUps(told)
    for _ in range(3):
        later.after(timedelta(seconds=0.05), "ns", "t")
    assert told.wakes == [] and len(later) == 1
    assert await told.next() == {("ns", "t"): 3}
    assert len(later) == 0


async def test_an_accept_wakes_for_its_events_available_now_at_once_and_for_the_delayed_ones_later() -> None:
    told = Told()
    later = DueWakeUps(told)
    now = datetime.now(UTC)
    events = [
        NewEvent(Namespace("ns"), EventKey("now"), "t", b"{}"),
        NewEvent(Namespace("ns"), EventKey("soon"), "t", b"{}", available_at=now + timedelta(seconds=0.05)),
        NewEvent(Namespace("ns"), EventKey("repeat"), "t", b"{}"),
    ]
    outcomes = [AcceptOutcome.ACCEPTED, AcceptOutcome.ACCEPTED, AcceptOutcome.DUPLICATE]
    later.accepted(events, [AcceptResult(outcome, EventState.PENDING, now) for outcome in outcomes], now)
    assert told.wakes == [{("ns", "t"): 1}]
    assert await told.next() == {("ns", "t"): 1}


async def test_beyond_its_bound_a_moment_is_left_to_the_poller(monkeypatch: pytest.MonkeyPatch) -> None:
    later = DueWakeUps(Told())
    monkeypatch.setattr(claimable, "MAX_TIMERS", 2)
    for delay in (60, 61, 62):
        later.after(timedelta(seconds=delay), "ns", "t")
    assert len(later) == 2


def test_a_keyed_claim_token_says_so() -> None:
    assert keyed_token("k-0b7c")
    assert not keyed_token("0b7c")
