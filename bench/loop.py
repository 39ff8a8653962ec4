"""The closed-loop driver: N clients, each sends its next request when the last one is answered.

Only requests answered inside the window count; the warm-up before it fills
caches and connection pools. A client whose step returns None has run out of
work (the queue is drained): it stops, and the window closes early when all
have stopped, so a drained queue does not dilute the rate with idle time.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from bench.cpu import CpuProbe, CpuShare

# One client's next request: returns how many units (rows, events) it did, or None when out of work.
Step = Callable[[], Awaitable[int | None]]


@dataclass
class Throughput:
    """What a window measured: requests, units (rows), latencies, and where the CPU went."""

    ops: int
    units: int
    seconds: float
    latencies: list[float] = field(repr=False)
    cpu: CpuShare | None = None
    errors: int = 0
    first_error: str = ""

    @property
    def ops_per_s(self) -> float:
        return self.ops / self.seconds if self.seconds > 0 else 0.0

    @property
    def units_per_s(self) -> float:
        return self.units / self.seconds if self.seconds > 0 else 0.0

    def percentile_ms(self, q: float) -> float:
        return 1000.0 * percentile(self.latencies, q)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation; 0 for no values."""
    if not values:
        return 0.0
    if len(values) == 1:
        return values[0]
    cuts = statistics.quantiles(values, n=1000, method="inclusive")
    index = min(len(cuts) - 1, max(0, round(q * 1000) - 1))
    return cuts[index]


async def closed_loop(
    steps: Sequence[Step],
    *,
    warmup: float,
    duration: float,
    probe: CpuProbe | None = None,
) -> Throughput:
    """Runs every step in its own loop for warmup + duration seconds; counts the window only."""
    start = time.perf_counter()
    window_start = start + warmup
    window_end = window_start + duration
    ops = units = errors = 0
    latencies: list[float] = []
    last_stop = [window_end]
    first_error = [""]
    live = [len(steps)]
    all_stopped = asyncio.Event()

    async def client(step: Step) -> None:
        nonlocal ops, units, errors
        try:
            while True:
                began = time.perf_counter()
                if began >= window_end:
                    return
                try:
                    done = await step()
                except Exception as exc:
                    errors += 1
                    first_error[0] = first_error[0] or f"{type(exc).__name__}: {str(exc).strip()[:300]}"
                    raise
                answered = time.perf_counter()
                if done is None:
                    return
                if window_start <= answered <= window_end:
                    ops += 1
                    units += done
                    latencies.append(answered - began)
        finally:
            live[0] -= 1
            if live[0] == 0:
                last_stop[0] = min(window_end, max(window_start, time.perf_counter()))
                all_stopped.set()

    async def sample_cpu() -> CpuShare | None:
        if probe is None:
            return None
        await asyncio.sleep(max(0.0, window_start - time.perf_counter()))
        first = probe.snapshot()
        try:
            await asyncio.wait_for(all_stopped.wait(), max(0.0, window_end - time.perf_counter()))
        except TimeoutError:
            pass
        return CpuProbe.between(first, probe.snapshot())

    sampler = asyncio.create_task(sample_cpu())
    results = await asyncio.gather(*(client(s) for s in steps), return_exceptions=True)
    cpu = await sampler
    failures = [r for r in results if isinstance(r, BaseException)]
    if failures and not ops:
        raise failures[0]
    return Throughput(ops, units, last_stop[0] - window_start, latencies, cpu, errors, first_error[0])
