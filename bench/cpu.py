"""Where the CPU went: per-process CPU seconds and memory from /proc.

The machine has few cores and the server, PostgreSQL and the load generator
share them; a figure means little without knowing which of them was busy.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int, *, with_children: bool = False) -> float:
    """utime + stime of `pid` (and of its reaped children, when asked); 0 once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    # The command name may hold spaces; the fields after it are fixed.
    fields = text.rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(f) for f in fields[11:15])
    total = utime + stime + (cutime + cstime if with_children else 0)
    return total / _TICKS


def children_of(parent: int) -> list[int]:
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            found.append(int(entry.name))
    return found


def rss_bytes(pid: int, field: str = "VmRSS") -> int:
    """VmRSS (or VmHWM, the peak) of `pid` from /proc/PID/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


def machine_busy_seconds() -> float:
    """CPU seconds every core spent not idle since boot (all processes), from /proc/stat."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / _TICKS


def own_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


@dataclass
class CpuShare:
    """CPU seconds each part used in a window, and the window's length."""

    seconds: float
    used: dict[str, float]

    def percent_of_core(self, part: str) -> float:
        return 100.0 * self.used.get(part, 0.0) / self.seconds if self.seconds > 0 else 0.0

    def micros_per(self, part: str, ops: int) -> float:
        return 1e6 * self.used.get(part, 0.0) / ops if ops else 0.0

    def to_json(self) -> dict[str, object]:
        return {"seconds": round(self.seconds, 3), "used": {k: round(v, 3) for k, v in self.used.items()}}


# The benchmark may share its machine; whatever else ran shows up as "other".
OTHER = "other"


class CpuProbe:
    """Snapshots the CPU time of named process groups; two snapshots make a CpuShare.

    Besides the watched parts it reads the whole machine's busy time, so a
    share also says how much CPU went to processes that are not ours.
    """

    def __init__(self) -> None:
        self._parts: dict[str, Callable[[], float]] = {"client": own_cpu_seconds}

    def watch(self, name: str, read: Callable[[], float]) -> None:
        self._parts[name] = read

    def forget(self, name: str) -> None:
        self._parts.pop(name, None)

    def snapshot(self) -> tuple[float, dict[str, float]]:
        found = {name: read() for name, read in self._parts.items()}
        found[OTHER] = machine_busy_seconds()
        return time.monotonic(), found

    @staticmethod
    def between(first: tuple[float, dict[str, float]], second: tuple[float, dict[str, float]]) -> CpuShare:
        (t0, a), (t1, b) = first, second
        used = {name: max(0.0, b[name] - a.get(name, 0.0)) for name in b if name != OTHER}
        busy = b[OTHER] - a[OTHER]
        used[OTHER] = max(0.0, busy - sum(used.values()))
        return CpuShare(t1 - t0, used)


def group_cpu_seconds(pids: Iterable[int]) -> float:
    return sum(process_cpu_seconds(pid) for pid in pids)


def tree_cpu_seconds(pid: int) -> float:
    """`pid` and every live descendant, with the children each has reaped: a server of several processes."""
    total = process_cpu_seconds(pid, with_children=True)
    for child in children_of(pid):
        total += tree_cpu_seconds(child)
    return total


def tree_rss_bytes(pid: int) -> int:
    """VmRSS of `pid` and every live descendant."""
    try:
        total = rss_bytes(pid)
    except (OSError, RuntimeError):
        return 0
    return total + sum(tree_rss_bytes(child) for child in children_of(pid))
