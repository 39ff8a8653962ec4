"""Group commit, with no database: shared transactions, per-caller answers, isolated failures."""

from __future__ import annotations

import asyncio

import pytest

from inboxd.domain.errors import InvalidArgument, Unavailable
from inboxd.runtime.group_commit import Coalescer


class Recorder:
    """A batch runner that records each batch and can be held at its commit."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def run(self, items: list[int]) -> list[int]:
        self.batches.append(items)
        await self.gate.wait()
        if any(i < 0 for i in items):
            raise InvalidArgument("payload", "negative")
        return [i * 10 for i in items]


async def test_a_lone_caller_is_flushed_at_once_and_answered_in_order() -> None:
    recorder = Recorder()
    coalescer = Coalescer(recorder.run)
    assert await coalescer.submit([1, 2, 3]) == [10, 20, 30]
    assert recorder.batches == [[1, 2, 3]]


async def test_callers_arriving_during_a_commit_share_the_next_transaction() -> None:
    recorder = Recorder()
    coalescer = Coalescer(recorder.run, max_inflight=1)
    recorder.gate.clear()
    first = asyncio.create_task(coalescer.submit([1]))
    await asyncio.sleep(0)  # the first batch is now "committing"
    others = [asyncio.create_task(coalescer.submit([n])) for n in (2, 3, 4)]
    await asyncio.sleep(0)
    recorder.gate.set()
    assert await first == [10]
    assert [await o for o in others] == [[20], [30], [40]]
    assert recorder.batches == [[1], [2, 3, 4]]


async def test_a_second_transaction_starts_only_for_enough_waiting_items() -> None:
    recorder = Recorder()
    coalescer = Coalescer(recorder.run, max_inflight=2, parallel_at=3)
    recorder.gate.clear()
    first = asyncio.create_task(coalescer.submit([1]))
    await asyncio.sleep(0)  # in flight
    few = [asyncio.create_task(coalescer.submit([n])) for n in (2, 3)]
    await asyncio.sleep(0)
    assert recorder.batches == [[1]], "two items wait for the transaction in flight"
    many = asyncio.create_task(coalescer.submit([4]))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert recorder.batches == [[1], [2, 3, 4]], "a third item is company enough for a second transaction"
    recorder.gate.set()
    assert [await t for t in (first, *few, many)] == [[10], [20], [30], [40]]


async def test_a_big_submission_gets_a_second_transaction_at_once() -> None:
    recorder = Recorder()
    coalescer = Coalescer(recorder.run, max_inflight=2, parallel_at=3)
    recorder.gate.clear()
    first = asyncio.create_task(coalescer.submit([1]))
    await asyncio.sleep(0)
    batch = asyncio.create_task(coalescer.submit([2, 3, 4]))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert recorder.batches == [[1], [2, 3, 4]]
    recorder.gate.set()
    assert await first == [10]
    assert await batch == [20, 30, 40]


async def test_after_a_group_of_several_a_small_next_group_waits_briefly_for_company() -> None:
    recorder = Recorder()
    coalescer = Coalescer(recorder.run, max_inflight=1, gather_window=0.05)
    recorder.gate.clear()
    first = asyncio.create_task(coalescer.submit([1, 2, 3]))
    await asyncio.sleep(0)
    second = asyncio.create_task(coalescer.submit([4]))
    await asyncio.sleep(0)
    recorder.gate.set()
    assert await first == [10, 20, 30]
    late = asyncio.create_task(coalescer.submit([5]))  # arrives while the flusher waits
    assert await second == [40]
    assert await late == [50]
    assert recorder.batches == [[1, 2, 3], [4, 5]]


async def test_after_a_group_of_one_the_next_is_taken_at_once() -> None:
    recorder = Recorder()
    coalescer = Coalescer(recorder.run, max_inflight=1, gather_window=10.0)
    recorder.gate.clear()
    first = asyncio.create_task(coalescer.submit([1]))
    await asyncio.sleep(0)
    second = asyncio.create_task(coalescer.submit([2]))
    await asyncio.sleep(0)
    recorder.gate.set()
    # Were the flusher to wait its (here absurd) window, this would time out.
    assert list(await asyncio.wait_for(asyncio.gather(first, second), 1.0)) == [[10], [20]]
    assert recorder.batches == [[1], [2]]


async def test_a_submission_is_never_split_and_groups_respect_the_limit() -> None:
    recorder = Recorder()
    coalescer = Coalescer(recorder.run, max_items=4, max_inflight=1)
    recorder.gate.clear()
    blocker = asyncio.create_task(coalescer.submit([0]))
    await asyncio.sleep(0)
    calls = [asyncio.create_task(coalescer.submit(items)) for items in ([1, 2, 3], [4, 5], [6, 7, 8, 9, 10])]
    await asyncio.sleep(0)
    recorder.gate.set()
    await blocker
    assert [len(await c) for c in calls] == [3, 2, 5]
    assert recorder.batches == [[0], [1, 2, 3], [4, 5], [6, 7, 8, 9, 10]]


async def test_one_callers_bad_value_does_not_fail_its_neighbours() -> None:
    recorder = Recorder()
    coalescer = Coalescer(recorder.run, max_inflight=1)
    recorder.gate.clear()
    blocker = asyncio.create_task(coalescer.submit([0]))
    await asyncio.sleep(0)
    good = asyncio.create_task(coalescer.submit([1]))
    bad = asyncio.create_task(coalescer.submit([-1]))
    also_good = asyncio.create_task(coalescer.submit([2]))
    await asyncio.sleep(0)
    recorder.gate.set()
    await blocker
    assert await good == [10]
    assert await also_good == [20]
    with pytest.raises(InvalidArgument):
        await bad


async def test_an_unavailable_database_fails_every_caller_of_the_group() -> None:
    async def down(items: list[int]) -> list[int]:
        raise Unavailable("database unavailable")

    coalescer: Coalescer[int, int] = Coalescer(down)
    results = await asyncio.gather(coalescer.submit([1]), coalescer.submit([2]), return_exceptions=True)
    assert all(isinstance(r, Unavailable) for r in results)


async def test_a_caller_who_gives_up_does_not_cancel_the_shared_transaction() -> None:
    recorder = Recorder()
    coalescer = Coalescer(recorder.run, max_inflight=1)
    recorder.gate.clear()
    quitter = asyncio.create_task(coalescer.submit([1]))
    stayer = asyncio.create_task(coalescer.submit([2]))
    await asyncio.sleep(0)
    quitter.cancel()
    recorder.gate.set()
    assert await stayer == [20]
    assert quitter.cancelled()
    # One transaction, shared and run to its end (the stayer's answer came from it), the quitter's item in it.
    assert recorder.batches == [[1, 2]]
