"""The gRPC side of every throughput figure: bench/loadgen/loadgen.mjs, a Node process, driven from here.

The Node generator spends less CPU per call than the server it measures (the
page shows both), where a grpc.aio client in this process spent about as much
as the server and so measured itself. It prints a line when its measured
window opens and one when it closes; the CPU of the server and PostgreSQL is
sampled at those two moments, so both sides count the same window.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from bench.cpu import CpuProbe, CpuShare, tree_cpu_seconds
from bench.workload import EVENT_TYPE, PAYLOAD, RUN_ID

LOADGEN = Path(__file__).resolve().parent / "loadgen" / "loadgen.mjs"
_RUNS = itertools.count()
# The CPU probe's name for the Node process.
LOADGEN_PART = "loadgen"


class NodeSpec(Protocol):
    """A run of a Node script that speaks loadgen.mjs's protocol: its window's lines, then its result."""

    script: ClassVar[Path]

    @property
    def workload(self) -> str: ...

    def spec(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class NodeLoad:
    """One closed-loop run of the Node generator; see loadgen.mjs for the workloads."""

    script: ClassVar[Path] = LOADGEN
    target: str
    workload: str
    callers: int
    warmup_s: float
    duration_s: float
    namespace: str = ""
    rows: int = 100
    max_events: int = 1
    prefix: str = ""
    duplicate_keys: int = 500
    threads: int = 0
    channels: int = 0
    transport: str = "h2"
    # Work (streams.mjs): credit per stream, the subscription's lease, how long a worker waits for a push
    # before it stops, and the units after which a drain stops (0: the window decides).
    credit: int = 10
    lease_s: int = 30
    idle_ms: int = 1000
    max_units: int = 0
    event_type: str = EVENT_TYPE
    payload: str = PAYLOAD

    def spec(self) -> dict[str, Any]:
        found = asdict(self)
        # One thread unless asked: measured, a second thread cost more CPU per call (fewer answers
        # handled per turn of each event loop), and one thread outpaces the server's single process.
        # A few connections per thread, so several server processes (SO_REUSEPORT spreads
        # connections, not calls) all get some.
        found["threads"] = self.threads or 1
        found["channels"] = self.channels or min(4, max(1, self.callers // found["threads"]))
        # Fresh keys for every run of a load, a second attempt at a noisy window included.
        found["prefix"] = f"{RUN_ID}-{self.prefix or self.workload}-{next(_RUNS)}"
        return found


@dataclass
class NodeResult:
    """What one run measured, as loadgen.mjs reported it, with the CPU of every part over its window."""

    report: dict[str, Any]
    cpu: CpuShare | None

    @property
    def seconds(self) -> float:
        return float(self.report["seconds"])

    @property
    def ops(self) -> int:
        return int(self.report["ops"])

    @property
    def units(self) -> int:
        return int(self.report["units"])

    @property
    def errors(self) -> int:
        return int(self.report["errors"])


def node_binary() -> str:
    found = shutil.which("node")
    if found is None:
        raise RuntimeError("node is not on PATH: the load generator needs Node 20 (make setup installs its modules)")
    return found


async def spawn_node(load: NodeSpec, *, stdin: bool = False) -> asyncio.subprocess.Process:
    """The generator running `load`, its stdout (one JSON object a line) and stderr piped; stdin too if asked."""
    proc = await asyncio.create_subprocess_exec(
        node_binary(),
        str(load.script),
        json.dumps(load.spec()),
        stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "NODE_NO_WARNINGS": "1"},
    )
    assert proc.stdout is not None and proc.stderr is not None
    return proc


async def next_line(proc: asyncio.subprocess.Process, event: str, within: float) -> dict[str, Any]:
    """The generator's next line of `event` within `within` s; raises with its stderr when it exits first."""
    assert proc.stdout is not None and proc.stderr is not None
    async with asyncio.timeout(within):
        async for raw in proc.stdout:
            line: dict[str, Any] = json.loads(raw)
            if line["event"] == event:
                return line
    stderr = (await proc.stderr.read()).decode(errors="replace")
    raise RuntimeError(f"the load generator ended before {event!r}: {stderr.strip()[-2000:]}")


async def run_node(load: NodeSpec, probe: CpuProbe | None) -> NodeResult:
    """Runs one load; raises when the generator fails, or when every call failed."""
    proc = await spawn_node(load)
    assert proc.stdout is not None and proc.stderr is not None
    if probe is not None:
        probe.watch(LOADGEN_PART, lambda: tree_cpu_seconds(proc.pid))
    first: tuple[float, dict[str, float]] | None = None
    cpu: CpuShare | None = None
    report: dict[str, Any] | None = None
    try:
        async for raw in proc.stdout:
            line = json.loads(raw)
            if line["event"] == "window_start" and probe is not None:
                first = probe.snapshot()
            elif line["event"] == "window_end" and probe is not None and first is not None:
                cpu = CpuProbe.between(first, probe.snapshot())
            elif line["event"] == "result":
                report = line
        stderr = (await proc.stderr.read()).decode(errors="replace")
        code = await proc.wait()
    finally:
        if probe is not None:
            probe.forget(LOADGEN_PART)
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    if code != 0 or report is None:
        raise RuntimeError(f"the load generator failed ({load.workload}, exit {code}): {stderr.strip()[-2000:]}")
    if report.get("ops") == 0 and report.get("errors"):
        raise RuntimeError(f"every {load.workload} call failed: {report['first_error']}")
    return NodeResult(report, cpu)


async def probe_complete_batch(target: str) -> dict[str, Any]:
    """Whether protos/ has InboxService.CompleteBatch and the server serves it: {supported, reason}."""
    result = await run_node(NodeLoad(target, "probe_complete_batch", 1, 0.0, 0.0), None)
    return {"supported": bool(result.report["supported"]), "reason": str(result.report["reason"])}
