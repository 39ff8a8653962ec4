"""The edge benchmark's processes: the edge (`inboxd-edge`, one process or `--workers N`), the bare app, and a
run of the HTTP generator whose window the CPU probe samples.

Each is a subprocess of its own interpreter, started with this checkout's
Python; each prints a readiness line naming its port (port 0: the kernel
picks), and its stderr goes to a log file beside the cluster's (the edge
logs a line per request, as an operator runs it).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.cpu import CpuProbe, CpuShare, children_of, process_cpu_seconds, tree_cpu_seconds
from bench.edge_requests import EVENT, PATH

SECRET_ENV = "BENCH_EDGE_GITHUB_SECRET"
# Only the benchmark's edge and generator know it; it signs nothing else.
SECRET = "bench-edge-github-secret"
NAMESPACE = "bench/edge"
READY_SECONDS = 60.0
STOP_SECONDS = 30.0
LOADGEN_PART = "loadgen"


def routes_file(inboxd_target: str) -> str:
    """One `github` route (HMAC-SHA256 of the body, keyed on its SHA-256), as a push webhook's would be."""
    return f"""[edge]
listen = "127.0.0.1:0"

[inboxd]
target = "{inboxd_target}"

[[routes]]
name = "bench-github"
path = "{PATH}"
scheme = "github"
secrets_env = ["{SECRET_ENV}"]
namespace = "{NAMESPACE}"
event_type = "const:{EVENT}"
allowed_types = ["{EVENT}"]
"""


@dataclass
class Served:
    """A process serving HTTP on `port` (the edge's parent under --workers), and the log it writes."""

    name: str
    proc: asyncio.subprocess.Process
    port: int
    log: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def serving_pids(self) -> list[int]:
        """The processes that answer requests: the children under --workers, else the process itself."""
        return children_of(self.pid) or [self.pid]

    def cpu_parts(self, part: str) -> dict[str, Any]:
        """CPU readers for the probe: the process as `part`, or under --workers the parent and each worker.

        Parts that overlap would make the probe's "other" wrong, so a worker is never also counted in its parent.
        """
        workers = children_of(self.pid)
        if not workers:
            return {part: lambda: process_cpu_seconds(self.pid)}
        found: dict[str, Any] = {f"{part}.parent": lambda: process_cpu_seconds(self.pid)}
        for i, pid in enumerate(sorted(workers), 1):
            found[f"{part}.worker{i}"] = lambda pid=pid: process_cpu_seconds(pid)
        return found

    def tree_cpu(self) -> float:
        return tree_cpu_seconds(self.pid)


async def _start(name: str, args: list[str], log: Path, env: dict[str, str], ready: str) -> Served:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as sink:
        proc = await asyncio.create_subprocess_exec(
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=sink,
            env={**os.environ, **env, "PYTHONUNBUFFERED": "1"},
        )
    assert proc.stdout is not None
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), READY_SECONDS)).decode()
        if not line.startswith(ready):
            logged = await asyncio.to_thread(log.read_text)
            raise RuntimeError(f"{name} did not start: {line!r}; its log: {logged[-2000:]}")
    except BaseException:
        await _stop(proc)
        raise
    return Served(name, proc, int(line.rsplit(":", 1)[1]), log)


async def _stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is not None:
        return
    proc.terminate()
    try:
        await asyncio.wait_for(proc.wait(), STOP_SECONDS)
    except TimeoutError:
        proc.kill()
        await proc.wait()


@asynccontextmanager
async def edge(folder: Path, inboxd_target: str, workers: int) -> AsyncIterator[Served]:
    """`python -m inboxd_edge --workers N` on a free port, forwarding to `inboxd_target`; stopped after."""
    config = folder / "edge-routes.toml"
    config.write_text(routes_file(inboxd_target))
    args = [sys.executable, "-m", "inboxd_edge", "--config", str(config), "--workers", str(workers)]
    served = await _start(
        f"edge --workers {workers}",
        args,
        folder / f"edge-workers{workers}.log",
        {SECRET_ENV: SECRET},
        "inboxd-edge listening on ",
    )
    try:
        yield served
    finally:
        await _stop(served.proc)


@asynccontextmanager
async def bare_app(folder: Path) -> AsyncIterator[Served]:
    args = [sys.executable, "-m", "bench.bare_app", "127.0.0.1:0"]
    served = await _start("the bare app", args, folder / "bare-app.log", {}, "bare app listening on ")
    try:
        yield served
    finally:
        await _stop(served.proc)


@dataclass(frozen=True)
class HttpLoad:
    """One closed-loop run of bench/edge_loadgen.py against 127.0.0.1:`port`."""

    port: int
    connections: int
    warmup_s: float
    duration_s: float
    deliveries: int
    prefix: str

    def spec(self) -> str:
        return json.dumps(
            {
                "host": "127.0.0.1",
                "port": self.port,
                "connections": self.connections,
                "warmup_s": self.warmup_s,
                "duration_s": self.duration_s,
                "deliveries": self.deliveries,
                "prefix": self.prefix,
                "secret": SECRET,
            }
        )


@dataclass
class HttpResult:
    report: dict[str, Any]
    cpu: CpuShare | None


class _Window:
    """Follows the generator's lines: the probe's snapshots at the window's two ends, and its report."""

    def __init__(self, probe: CpuProbe | None, started: asyncio.Event | None) -> None:
        self.probe = probe
        self.started = started
        self.first: tuple[float, dict[str, float]] | None = None
        self.cpu: CpuShare | None = None
        self.report: dict[str, Any] | None = None

    def take(self, line: dict[str, Any]) -> None:
        event = line["event"]
        if event == "window_start":
            if self.started is not None:
                self.started.set()
            self.first = self.probe.snapshot() if self.probe is not None else None
        elif event == "window_end" and self.probe is not None and self.first is not None:
            self.cpu = CpuProbe.between(self.first, self.probe.snapshot())
        elif event == "result":
            self.report = line


async def run_http(
    load: HttpLoad,
    probe: CpuProbe | None,
    parts: dict[str, Any] | None = None,
    *,
    started: asyncio.Event | None = None,
) -> HttpResult:
    """Runs the generator; `parts` (name -> CPU reader) are watched for this window only. Raises when it fails.

    `started` is set when the measured window opens (signing the deliveries first takes seconds: a profile
    waits for it).
    """
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.edge_loadgen",
        load.spec(),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    watched = {**(parts or {}), LOADGEN_PART: lambda: process_cpu_seconds(proc.pid)} if probe is not None else {}
    for name, read in watched.items():
        assert probe is not None
        probe.watch(name, read)
    window = _Window(probe, started)
    try:
        async for raw in proc.stdout:
            window.take(json.loads(raw))
        stderr = (await proc.stderr.read()).decode(errors="replace")
        code = await proc.wait()
    finally:
        for name in watched:
            assert probe is not None
            probe.forget(name)
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    report = window.report
    if code != 0 or report is None:
        raise RuntimeError(f"the HTTP generator failed (exit {code}): {stderr.strip()[-2000:]}")
    if report["ops"] == 0:
        raise RuntimeError(f"no delivery answered 200 in the window: {report['first_error'] or 'no answer at all'}")
    return HttpResult(report, window.cpu)
