"""A profile's thread times (bench/thread_time.py): read from the kernel, and summed into the page's figures."""

from __future__ import annotations

import os
import threading
import time

import pytest

from bench import thread_time
from bench.report_profiles import profiles
from bench.thread_time import ThreadTimes

SECOND = 1_000_000_000


def test_a_thread_that_spins_shows_its_time_on_a_cpu() -> None:
    pid = os.getpid()
    main = (pid, threading.main_thread().native_id)
    before = thread_time.snapshot([pid])
    if main not in before:
        pytest.skip("this kernel keeps no schedstat")  # the page then shows no thread times at all
    assert threading.current_thread() is threading.main_thread()
    stop = time.monotonic() + 0.3
    while time.monotonic() < stop:
        pass
    after = thread_time.snapshot([pid])
    assert after[main].main
    # 0.3 s of spinning: most of it on a CPU, unless the machine kept this thread waiting for one.
    spun = after[main].on_cpu_ns + after[main].waiting_ns - before[main].on_cpu_ns - before[main].waiting_ns
    assert spun >= 0.25 * SECOND
    assert after[main].on_cpu_ns - before[main].on_cpu_ns >= 0.05 * SECOND


def test_the_window_is_split_into_time_on_a_cpu_and_time_waiting_for_one() -> None:
    before = {
        (1, 1): ThreadTimes(True, 0, 0, 0),
        (1, 2): ThreadTimes(False, 0, 0, 0),
        (2, 2): ThreadTimes(True, 0, 0, 0),
    }
    after = {
        (1, 1): ThreadTimes(True, 5 * SECOND, 3 * SECOND, 10_000),
        (1, 2): ThreadTimes(False, SECOND // 10, SECOND, 5_000),
        (2, 2): ThreadTimes(True, 2 * SECOND, SECOND, 2_000),
        (3, 3): ThreadTimes(True, 9 * SECOND, 0, 1),  # not there at the start: left out
    }
    times = thread_time.between(before, after, 10.0)
    assert times["event loop"] == {"on_cpu_percent": 70.0, "waiting_percent": 40.0, "slices_per_s": 1200}
    assert times["other threads"] == {"on_cpu_percent": 1.0, "waiting_percent": 10.0, "slices_per_s": 500}
    # Of the event loops' 11 busy seconds, 4 were waiting for a core: samples, not CPU.
    assert thread_time.waiting_share(times) == pytest.approx(36.4)


def test_no_counters_no_figures() -> None:
    assert thread_time.between({}, {}, 10.0) == {}
    assert thread_time.waiting_share({}) is None


def test_the_profiles_section_shows_both_runs_thread_times() -> None:
    def profile(waiting: float) -> dict[str, object]:
        loop = {"on_cpu_percent": 50.0, "waiting_percent": waiting, "slices_per_s": 100}
        return {
            "workload": "Work",
            "samples": 100,
            "parts": {},
            "own": [],
            "inclusive": [],
            "threads": {"event loop": loop},
        }

    lines = profiles(
        {"profiles": {"work": profile(50.0)}}, {"git": "abc", "date": "d", "profiles": {"work": profile(25.0)}}
    )
    assert "| event loop: waiting for a CPU | 25.0% | 50.0% |" in lines
    assert "| the event loop's samples that were waiting, not CPU | 33.3% | 50.0% |" in lines
