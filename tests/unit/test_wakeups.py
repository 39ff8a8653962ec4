"""The wake-up bus, with no database."""

from __future__ import annotations

from inboxd.wakeups import WakeBus


async def test_an_event_wakes_one_matching_waiter_the_longest_waiting() -> None:
    bus = WakeBus()
    first = bus.register(["a"], [])
    second = bus.register(["a"], [])
    assert bus.notify("a", "t") == 1
    assert first.woken.is_set() and not second.woken.is_set()


async def test_filters_decide_who_is_woken() -> None:
    bus = WakeBus()
    other_ns = bus.register(["b"], [])
    other_type = bus.register(["a"], ["order.paid"])
    anything = bus.register([], [])
    assert bus.notify("a", "order.refunded", count=5) == 1
    assert anything.woken.is_set()
    assert not other_ns.woken.is_set() and not other_type.woken.is_set()


async def test_notify_all_wakes_everyone_and_unregister_forgets() -> None:
    bus = WakeBus()
    gone = bus.register([], [])
    bus.unregister(gone)
    stays = bus.register([], [])
    bus.notify_all()
    assert stays.woken.is_set() and not gone.woken.is_set()
    assert len(bus) == 1
