"""Waking long-polling Claims when work arrives, without polling the database per waiter.

A waiter registers *before* it looks for work, so an event that arrives
between its empty look and its wait still wakes it. Each arriving event
wakes at most one matching waiter (the longest waiting), so a thousand idle
workers do not stampede the database for one event.

Waiters are filed by (namespace, event type), with wildcard buckets for the
ones that name no namespace or no type, so a wake-up looks only at waiters
that may take the event. A waiter wants only what its caller may claim: one
that names no namespace carries its token's namespace patterns, so a
restricted worker never takes the wake-up meant for an eligible one.

A waiter by pattern is filed under each pattern's fixed prefix ("tenant-a/"
for "tenant-a/%"), and a wake-up looks only in the buckets of its
namespace's own prefixes (one dict lookup per distinct prefix length). So a
tenant's waiters with many-star patterns cost another tenant's Accept
nothing: filed under "any namespace", each Accept matched every one of
them (200 Work streams of 100 globs of 245 stars took Accepts from 1-8 ms
to seconds). Only patterns with no fixed prefix, which only a token granted
them may name, are still matched on every wake-up; their number is bounded
by the stream and glob caps (api/live_streams.py, domain/namespace_patterns.py).

A wake-up is handed on, not dropped, when the waiter it reached does not use
it: the waiter went away, returned holding other events, or looked and found
nothing (then at most MAX_HOPS times, so a wake-up for an event someone else
took does not circle forever; the per-process poller covers the rest).

The bus also remembers which kinds it was told about, in a sequence the
poller reads (`wake_seq`, `woken_since`): a poller's finding "nothing due for
this filter" holds only while no wake-up that filter wants has come since
its look began, whether or not a waiter was there to take it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from inboxd.domain.namespace_patterns import LikeMatcher, coarsened, like_matcher, like_prefix, shortest_prefixes
from inboxd.domain.vocabulary import Wanted

# How many times a wake-up that found nothing is handed to the next waiter.
MAX_HOPS = 3
# (pattern, type) pairs the due poller's look passes at most: 4,096 globs (256 streams
# of 16), each adapted in Python for PostgreSQL, held the event loop for milliseconds a look.
MOST_PATTERNS_LOOKED_UP = 64
# Kinds of wake-up remembered between two of the poller's looks; beyond, the bus
# remembers only "anything may have changed" (while nobody waits, nobody looks).
MAX_REMEMBERED_KINDS = 1024

# A bucket key: (namespace or None for "any namespace", event type or None for "any type").
_Key = tuple[str | None, str | None]
# A pattern bucket's key: (the fixed text its waiters' patterns begin with, event type or None).
_PrefixKey = tuple[str, str | None]


@dataclass(frozen=True, slots=True)
class WakeUp:
    """Why a waiter was woken: an event of this kind became claimable."""

    namespace: str
    event_type: str
    hops: int = 0


@dataclass(frozen=True)
class WaitFilter:
    """What a waiter may take: namespaces and event types (empty: any), and its token's namespace patterns.

    Waiters with equal filters are alike to the poller: one look answers for all of them.
    """

    namespaces: frozenset[str]
    event_types: frozenset[str]
    # SQL LIKE patterns: the waiter also wants every namespace one matches (as ClaimRequest's).
    namespace_patterns: tuple[str, ...] = ()
    _patterns: LikeMatcher | None = field(default=None, init=False, compare=False, repr=False)
    # The patterns' fixed prefixes, none a prefix of another: every name a pattern matches starts with one.
    prefixes: tuple[str, ...] = field(default=(), init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.namespace_patterns:
            object.__setattr__(self, "_patterns", like_matcher(self.namespace_patterns))
            object.__setattr__(self, "prefixes", shortest_prefixes(like_prefix(p) for p in self.namespace_patterns))

    def wants(self, namespace: str, event_type: str) -> bool:
        if self.event_types and event_type not in self.event_types:
            return False
        if not self.namespaces and self._patterns is None:
            return True
        if namespace in self.namespaces:
            return True
        # The prefixes first, in one C call: most names are another tenant's.
        return self._patterns is not None and namespace.startswith(self.prefixes) and self._patterns.matches(namespace)

    def keys(self) -> Iterator[_Key]:
        """The buckets of the namespaces it names (or of any namespace, naming none and no pattern)."""
        namespaces: Iterable[str | None] = self.namespaces or (() if self.namespace_patterns else (None,))
        return itertools.product(namespaces, self._types())

    def prefix_keys(self) -> Iterator[_PrefixKey]:
        """The buckets of its patterns' prefixes: which names match is known only on a wake-up."""
        return itertools.product(self.prefixes, self._types())

    def _types(self) -> Iterable[str | None]:
        return self.event_types or (None,)


@dataclass(eq=False)
class Waiter:
    filter: WaitFilter
    seq: int = 0
    woken: asyncio.Event = field(default_factory=asyncio.Event)
    # The wake-up this waiter holds and has not looked for yet.
    wake_up: WakeUp | None = None

    def wants(self, namespace: str, event_type: str) -> bool:
        return self.filter.wants(namespace, event_type)

    def take_wake_up(self) -> WakeUp | None:
        """Before a look: forgets the signal and returns the wake-up the look now answers."""
        held, self.wake_up = self.wake_up, None
        self.woken.clear()
        return held


class WakeBus:
    """The waiters of one server process, filed by what they want, oldest first within each file."""

    def __init__(self) -> None:
        # Dicts keep insertion (= seq) order and remove in O(1).
        self._buckets: dict[_Key, dict[Waiter, None]] = {}
        # Waiters by pattern, by prefix; and how many of those buckets have a prefix of each length.
        self._by_prefix: dict[_PrefixKey, dict[Waiter, None]] = {}
        self._prefix_lengths: Counter[int] = Counter()
        # The distinct filters of the waiters, each with its one shared object and how many wait with it.
        self._filters: dict[WaitFilter, tuple[WaitFilter, int]] = {}
        self._count = 0
        self._seq = itertools.count()
        # Counts every wake-up told to the bus; below, the last one per kind, and the last "look again, all".
        self._wake_seq = 0
        self._woken_kinds: dict[str, dict[str, int]] = {}
        self._remembered = 0
        self._everything_at = 0

    def __len__(self) -> int:
        return self._count

    def register(
        self, namespaces: Iterable[str], event_types: Iterable[str], namespace_patterns: Iterable[str] = ()
    ) -> Waiter:
        wait_filter = WaitFilter(frozenset(namespaces), frozenset(event_types), tuple(namespace_patterns))
        shared, waiting = self._filters.get(wait_filter, (wait_filter, 0))
        self._filters[shared] = (shared, waiting + 1)
        waiter = Waiter(shared, seq=next(self._seq))
        for key in shared.keys():
            self._buckets.setdefault(key, {})[waiter] = None
        for prefix_key in shared.prefix_keys():
            bucket = self._by_prefix.get(prefix_key)
            if bucket is None:
                bucket = self._by_prefix[prefix_key] = {}
                self._prefix_lengths[len(prefix_key[0])] += 1
            bucket[waiter] = None
        self._count += 1
        return waiter

    def unregister(self, waiter: Waiter, taken: Iterable[tuple[str, str]] = (), held: WakeUp | None = None) -> None:
        """Forgets `waiter`; the wake-ups it held and did not use (`taken`: the kinds it claimed) go on."""
        removed = self._unfile(waiter)
        if not removed:
            return
        self._count -= 1
        shared, waiting = self._filters.pop(waiter.filter)
        if waiting > 1:
            self._filters[shared] = (shared, waiting - 1)
        unused = list(taken)
        for wake_up in (held, waiter.take_wake_up()):
            if wake_up is None:
                continue
            kind = (wake_up.namespace, wake_up.event_type)
            if kind in unused:
                unused.remove(kind)
            else:
                self.notify(wake_up.namespace, wake_up.event_type, hops=wake_up.hops)

    def _unfile(self, waiter: Waiter) -> bool:
        """Takes `waiter` out of its buckets; whether it was in any."""
        removed = False
        for key in waiter.filter.keys():
            bucket = self._buckets.get(key)
            if bucket is not None and bucket.pop(waiter, False) is None:
                removed = True
                if not bucket:
                    del self._buckets[key]
        for prefix_key in waiter.filter.prefix_keys():
            bucket = self._by_prefix.get(prefix_key)
            if bucket is not None and bucket.pop(waiter, False) is None:
                removed = True
                if not bucket:
                    del self._by_prefix[prefix_key]
                    self._prefix_lengths[len(prefix_key[0])] -= 1
                    if not self._prefix_lengths[len(prefix_key[0])]:
                        del self._prefix_lengths[len(prefix_key[0])]
        return removed

    def looked_in_vain(self, waiter: Waiter, held: WakeUp | None) -> None:
        """`waiter` was woken and found nothing: the wake-up goes to another waiter, a bounded number of times."""
        if held is not None and held.hops < MAX_HOPS:
            self.notify(held.namespace, held.event_type, hops=held.hops + 1, skip=waiter)

    def notify(
        self, namespace: str, event_type: str, count: int = 1, *, hops: int = 0, skip: Waiter | None = None
    ) -> int:
        """Wakes up to `count` waiters that want this kind of event, oldest first; returns how many."""
        woken = 0
        if count <= 0:
            return 0
        self._remember(namespace, event_type)
        # Waiters with equal filters share one (register): each filter is judged once per wake-up.
        verdicts: dict[int, bool] = {}
        for waiter in self._candidates(namespace, event_type):
            if waiter is skip or waiter.woken.is_set():
                continue
            wanted = verdicts.get(id(waiter.filter))
            if wanted is None:
                wanted = verdicts[id(waiter.filter)] = waiter.wants(namespace, event_type)
            if wanted:
                waiter.wake_up = WakeUp(namespace, event_type, hops)
                waiter.woken.set()
                woken += 1
                if woken >= count:
                    break
        return woken

    def notify_all(self) -> None:
        """Everyone looks again."""
        self.anything_may_have_changed()
        for bucket in [*self._buckets.values(), *self._by_prefix.values()]:
            for waiter in bucket:
                waiter.woken.set()

    def anything_may_have_changed(self) -> None:
        """Wake-ups may have been lost (a replica's signals, say): no earlier "nothing due" holds."""
        self._wake_seq += 1
        self._everything_at = self._wake_seq

    def _remember(self, namespace: str, event_type: str) -> None:
        """Even when nobody waits: a Claim that comes next must not trust an older "nothing due"."""
        self._wake_seq += 1
        types = self._woken_kinds.setdefault(namespace, {})
        if event_type not in types:
            if self._remembered >= MAX_REMEMBERED_KINDS:
                self._forget_all_kinds()
                self._everything_at = self._wake_seq
                types = self._woken_kinds.setdefault(namespace, {})
            self._remembered += 1
        types[event_type] = self._wake_seq

    def _forget_all_kinds(self) -> None:
        self._woken_kinds = {}
        self._remembered = 0

    @property
    def wake_seq(self) -> int:
        """The number of the latest wake-up: a look that begins now knows of all up to it."""
        return self._wake_seq

    def woken_since(self, wait_filter: WaitFilter, seq: int) -> bool:
        """Whether a wake-up `wait_filter` wants (or a "look again, all") came after wake-up number `seq`."""
        if self._everything_at > seq:
            return True
        if wait_filter.namespaces:
            kinds = ((ns, self._woken_kinds.get(ns)) for ns in wait_filter.namespaces)
        else:
            kinds = ((ns, types) for ns, types in self._woken_kinds.items())
        for namespace, types in kinds:
            if types is None:
                continue
            for event_type, at in types.items():
                if at > seq and wait_filter.wants(namespace, event_type):
                    return True
        return False

    def forget_wake_ups_until(self, seq: int) -> None:
        """Drops what `woken_since` no longer needs: nobody will ask about wake-ups up to `seq`."""
        kept: dict[str, dict[str, int]] = {}
        for namespace, types in self._woken_kinds.items():
            recent = {event_type: at for event_type, at in types.items() if at > seq}
            if recent:
                kept[namespace] = recent
        self._woken_kinds = kept
        self._remembered = sum(len(types) for types in kept.values())

    def filters(self) -> list[WaitFilter]:
        """The distinct filters of the waiters."""
        return list(self._filters)

    def wanted(self) -> Wanted:
        in_namespaces: set[tuple[str, str]] = set()
        by_patterns: set[tuple[str, str]] = set()
        anywhere: set[str] = set()
        for wait_filter in self._filters:
            kinds = wait_filter.event_types or frozenset({""})
            in_namespaces.update(itertools.product(wait_filter.namespaces, kinds))
            by_patterns.update(itertools.product(wait_filter.namespace_patterns, kinds))
            if not wait_filter.namespaces and not wait_filter.namespace_patterns:
                anywhere.update(kinds)
        return Wanted(
            frozenset(in_namespaces), coarsened(frozenset(by_patterns), MOST_PATTERNS_LOOKED_UP), frozenset(anywhere)
        )

    def _candidates(self, namespace: str, event_type: str) -> Iterator[Waiter]:
        keys: tuple[_Key, ...] = ((namespace, event_type), (namespace, None), (None, event_type), (None, None))
        buckets = [iter(self._buckets[key]) for key in keys if key in self._buckets]
        # A waiter by pattern only where its prefix begins the name (a waiter in two buckets is woken once).
        for length in self._prefix_lengths:
            if length <= len(namespace):
                head = namespace[:length]
                for prefix_key in ((head, event_type), (head, None)):
                    bucket = self._by_prefix.get(prefix_key)
                    if bucket is not None:
                        buckets.append(iter(bucket))
        if not buckets:
            return iter(())
        if len(buckets) == 1:
            return buckets[0]
        return heapq.merge(*buckets, key=lambda waiter: waiter.seq)
