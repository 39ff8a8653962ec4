"""The wake-up bus, with no database."""

from __future__ import annotations

import time

import pytest

from inboxd.domain.namespace_patterns import grant_to_like
from inboxd.runtime.wakeups import MAX_HOPS, MAX_REMEMBERED_KINDS, WaitFilter, WakeBus


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


async def test_a_waiter_restricted_by_its_token_does_not_take_a_wake_up_it_cannot_use() -> None:
    bus = WakeBus()
    restricted = bus.register([], [], namespace_patterns=["tenant-a/%"])
    eligible = bus.register([], [], namespace_patterns=["tenant-b/%"])
    assert bus.notify("tenant-b/x", "t") == 1
    assert eligible.woken.is_set() and not restricted.woken.is_set()


async def test_like_patterns_match_as_postgresql_matches_them() -> None:
    bus = WakeBus()
    literal = bus.register([], [], namespace_patterns=[r"a\_b/%"])
    assert bus.notify("axb/1", "t") == 0
    assert bus.notify("a_b/1", "t") == 1
    assert literal.woken.is_set()


async def test_a_waiter_that_returns_holding_other_events_passes_its_wake_up_on() -> None:
    bus = WakeBus()
    first = bus.register(["a"], [])
    second = bus.register(["a"], ["paid"])
    bus.notify("a", "paid")
    held = first.take_wake_up()
    bus.unregister(first, taken=[("a", "refunded")], held=held)
    assert second.woken.is_set()
    assert second.wake_up is not None and (second.wake_up.namespace, second.wake_up.event_type) == ("a", "paid")


async def test_a_waiter_that_took_what_woke_it_passes_nothing_on() -> None:
    bus = WakeBus()
    first = bus.register(["a"], [])
    second = bus.register(["a"], [])
    bus.notify("a", "paid")
    bus.unregister(first, taken=[("a", "paid")], held=first.take_wake_up())
    assert not second.woken.is_set()


async def test_a_cancelled_waiter_passes_its_wake_up_on() -> None:
    bus = WakeBus()
    first = bus.register([], [])
    second = bus.register([], [])
    bus.notify("a", "t")
    bus.unregister(first)
    assert second.woken.is_set()


async def test_a_wake_up_that_finds_nothing_goes_round_a_bounded_number_of_times() -> None:
    bus = WakeBus()
    waiters = [bus.register(["a"], []) for _ in range(MAX_HOPS + 3)]
    bus.notify("a", "t")
    looks = 0
    while any(w.woken.is_set() for w in waiters):
        for waiter in waiters:
            if waiter.woken.is_set():
                looks += 1
                bus.looked_in_vain(waiter, waiter.take_wake_up())
    assert looks == MAX_HOPS + 1


async def test_a_wake_up_looks_only_at_waiters_filed_under_its_kind() -> None:
    bus = WakeBus()
    others = [bus.register([f"ns-{i}"], []) for i in range(1000)]
    mine = bus.register(["a"], [])
    anywhere = bus.register([], ["other.type"])
    assert sum(1 for _ in bus._candidates("a", "t")) == 1
    assert bus.notify("a", "t") == 1
    assert mine.woken.is_set() and not anywhere.woken.is_set()
    assert not any(w.woken.is_set() for w in others)


async def test_wanted_sums_up_what_the_waiters_want_for_the_poller() -> None:
    bus = WakeBus()
    bus.register(["a", "b"], ["paid"])
    bus.register(["a"], [])
    bus.register([], [], namespace_patterns=["t/%"])
    bus.register([], ["x"])
    wanted = bus.wanted()
    assert wanted.in_namespaces == {("a", "paid"), ("b", "paid"), ("a", "")}
    assert wanted.by_patterns == {("t/%", "")}
    assert wanted.anywhere == {"x"}
    assert not WakeBus().wanted()


def test_a_wake_up_is_remembered_for_the_pollers_finding_even_when_nobody_waits() -> None:
    bus = WakeBus()
    wanted_filter = WaitFilter(frozenset({"a"}), frozenset())
    seq = bus.wake_seq
    bus.notify("b", "t")
    assert not bus.woken_since(wanted_filter, seq)
    bus.notify("a", "t")
    assert bus.woken_since(wanted_filter, seq)
    assert not bus.woken_since(wanted_filter, bus.wake_seq)
    bus.forget_wake_ups_until(bus.wake_seq)
    assert not bus.woken_since(wanted_filter, seq)
    bus.anything_may_have_changed()
    assert bus.woken_since(wanted_filter, seq)


def test_a_token_restricted_filter_is_spoilt_only_by_what_it_may_claim() -> None:
    bus = WakeBus()
    restricted = WaitFilter(frozenset(), frozenset(), ("tenant-a/%",))
    seq = bus.wake_seq
    bus.notify("tenant-b/x", "t")
    assert not bus.woken_since(restricted, seq)
    bus.notify("tenant-a/x", "t")
    assert bus.woken_since(restricted, seq)


def test_the_bus_remembers_a_bounded_number_of_kinds_then_that_anything_may_have_changed() -> None:
    bus = WakeBus()
    seq = bus.wake_seq
    for i in range(MAX_REMEMBERED_KINDS + 10):
        bus.notify(f"ns-{i}", "t")
    assert sum(len(types) for types in bus._woken_kinds.values()) <= MAX_REMEMBERED_KINDS
    assert bus.woken_since(WaitFilter(frozenset({"ns-0"}), frozenset()), seq)


def test_waiters_with_one_filter_share_it_and_the_poller_sees_it_once() -> None:
    bus = WakeBus()
    first = bus.register(["a"], ["t"])
    second = bus.register(["a"], ["t"])
    assert first.filter is second.filter
    assert bus.filters() == [first.filter]
    bus.unregister(first)
    assert bus.filters() == [second.filter]
    bus.unregister(second)
    assert bus.filters() == []


def test_a_wake_up_in_a_long_namespace_meets_a_many_star_grant_without_stalling_the_bus() -> None:
    bus = WakeBus()
    waiter = bus.register((), (), (grant_to_like("*/*/*/*/*/orders"),))
    fastest = float("inf")
    for _ in range(20):  # the fastest of several: a loaded machine slows some runs, not the bus
        started = time.perf_counter()
        assert bus.notify("/" * 511 + "x", "order.paid") == 0
        fastest = min(fastest, time.perf_counter() - started)
    assert fastest < 0.001
    assert bus.notify("/" * 506 + "orders", "order.paid") == 1
    assert waiter.woken.is_set()


def test_another_tenants_event_never_meets_a_waiters_patterns_filed_under_their_prefix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bus = WakeBus()
    # 100 waiters of tenant-x, each with many-star patterns of its own, and one of any namespace by pattern.
    tenant_x = [bus.register([], [], [grant_to_like(f"tenant-x/w{i}-*a*a*a*a")]) for i in range(100)]
    anywhere = bus.register([], ["order.paid"], [grant_to_like("*-prod")])
    asked: list[str] = []
    wants = WaitFilter.wants

    def counted(self: WaitFilter, namespace: str, event_type: str) -> bool:
        asked.append(namespace)
        return wants(self, namespace, event_type)

    monkeypatch.setattr(WaitFilter, "wants", counted)
    assert bus.notify("tenant-v/orders", "order.paid", count=5) == 0
    assert asked == ["tenant-v/orders"]  # the one pattern with no fixed prefix, and only it
    assert bus.notify("tenant-x/w7-aaaa", "order.paid") == 1
    assert tenant_x[7].woken.is_set() and not any(w.woken.is_set() for i, w in enumerate(tenant_x) if i != 7)
    assert bus.notify("tenant-v/eu-prod", "order.paid") == 1 and anywhere.woken.is_set()
    for waiter in (*tenant_x, anywhere):
        bus.unregister(waiter)
    assert len(bus) == 0 and bus.notify("tenant-x/w7-aaaa", "t") == 0
