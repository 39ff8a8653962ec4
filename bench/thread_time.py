"""Where a profiled server's threads spent a window: on a CPU, or runnable and waiting for one.

py-spy leaves idle threads out, but it counts a thread that is runnable and
not running (preempted, or woken and not yet scheduled) as busy, and charges
the sample to the frame it stopped in. On this 2-core machine PostgreSQL, the
load generator and the server share the cores: a `send` to PostgreSQL wakes
its backend, which often takes the core there and then, and the server's
thread waits in that frame. Measured once, at bbb6f0b under Work: the event
loop's thread ran 5.4 s and waited 3.6 s for a core in 10 s, and
`BaseCursor._send_query_prepared`, 23% of the profile's samples, was mostly
that waiting, not CPU (`py-spy --native` put only `send` itself under it).
So each profile carries these figures beside it, from the kernel's
/proc/<pid>/task/<tid>/schedstat (nanoseconds on a CPU, nanoseconds waiting
on a run queue, time slices).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROC = Path("/proc")


@dataclass(frozen=True, slots=True)
class ThreadTimes:
    """One thread's counters at one instant."""

    main: bool  # the process's first thread: inboxd's event loop
    on_cpu_ns: int
    waiting_ns: int
    slices: int


Snapshot = dict[tuple[int, int], ThreadTimes]


def snapshot(pids: list[int]) -> Snapshot:
    """Every thread of `pids` now; empty where the kernel keeps no schedstat (then nothing is reported)."""
    found: Snapshot = {}
    for pid in pids:
        try:
            tids = [int(t.name) for t in (PROC / str(pid) / "task").iterdir() if t.name.isdigit()]
        except OSError:
            continue
        for tid in tids:
            try:
                on_cpu, waiting, slices = (PROC / str(pid) / "task" / str(tid) / "schedstat").read_text().split()[:3]
            except (OSError, ValueError):
                continue
            found[(pid, tid)] = ThreadTimes(tid == pid, int(on_cpu), int(waiting), int(slices))
    return found


def between(before: Snapshot, after: Snapshot, seconds: float) -> dict[str, Any]:
    """The window's figures, in % of the window (summed over processes), per kind of thread; {} without data."""
    if seconds <= 0:
        return {}
    sums = {"event loop": [0, 0, 0], "other threads": [0, 0, 0]}
    for key, end in after.items():
        start = before.get(key)
        if start is None:
            continue
        totals = sums["event loop" if end.main else "other threads"]
        totals[0] += end.on_cpu_ns - start.on_cpu_ns
        totals[1] += end.waiting_ns - start.waiting_ns
        totals[2] += end.slices - start.slices
    if not any(any(v) for v in sums.values()):
        return {}
    window_ns = seconds * 1e9
    return {
        kind: {
            "on_cpu_percent": round(100.0 * on_cpu / window_ns, 1),
            "waiting_percent": round(100.0 * waiting / window_ns, 1),
            "slices_per_s": round(slices / seconds),
        }
        for kind, (on_cpu, waiting, slices) in sums.items()
    }


def described(times: dict[str, Any]) -> str:
    """One line for the page: each kind of thread's time on a CPU and waiting for one."""
    return "; ".join(
        f"{kind} on a CPU {t['on_cpu_percent']:.0f}% of the window, waiting for one {t['waiting_percent']:.0f}%"
        for kind, t in times.items()
    )


def waiting_share(times: dict[str, Any]) -> float | None:
    """Of the event loop's busy time (on a CPU or waiting for one), the share spent waiting: the part of
    its samples that is not CPU."""
    loop = times.get("event loop")
    if not loop:
        return None
    busy = loop["on_cpu_percent"] + loop["waiting_percent"]
    return None if busy <= 0 else round(100.0 * loop["waiting_percent"] / busy, 1)
