"""py-spy profiles of the server under load: where its CPU goes, by function, from raw collapsed stacks.

`py-spy record -f raw` writes one line per distinct stack: frames from the
root to the leaf separated by ';', each `function (file:line)`, then the
number of samples. A function's own samples are those where it is the leaf;
its inclusive samples are those where it is anywhere on the stack (once per
stack). Lines are dropped from the key, so a function counts once however
many of its lines were sampled. Only Python frames are seen: time spent in C
(grpc's core, psycopg's C parts, the kernel) is charged to the Python frame
that called it. Idle threads are not sampled, but a thread waiting for a core
is, in the frame it stopped in (bench/thread_time.py measures how much). The
inclusive list leaves out the frames every stack runs through (asyncio's
loop, runpy, threading, inboxd's CLI).
"""

from __future__ import annotations

import asyncio
import gzip
import logging
import re
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench import thread_time
from bench.cpu import children_of

log = logging.getLogger("bench")

_FRAME = re.compile(r"^(?P<function>.*) \((?P<file>.*?)(?::\d+)?\)$")
TOP = 15

# Frames on nearly every stack (the event loop, start-up, threads): left out of the inclusive list.
TRUNK_FILES = (
    "asyncio/",
    "<frozen runpy>",
    "threading.py",
    "selectors.py",
    "inboxd/__main__.py",
    "inboxd/serving/cli.py",
    "inboxd_edge/__main__.py",
    "inboxd_edge/cli.py",
)

# A sample belongs to the part of the frame nearest its leaf that lives in one of these; frames of
# other standard modules (re, threading, selectors, enum ...) count for their caller's part.
PARTS = (
    ("inboxd", ("inboxd/", "inboxd_client/")),
    ("psycopg", ("psycopg/", "psycopg_pool/", "psycopg_binary/")),
    ("grpc", ("grpc/", "grpc_health/", "grpc_reflection/", "google/protobuf/")),
    ("asyncio", ("asyncio/", "uvloop/", "selectors.py")),
    ("logging", ("logging/",)),
    ("json", ("json/",)),
    ("prometheus_client", ("prometheus_client/",)),
)


def py_spy() -> Path:
    found = Path(sys.executable).parent / "py-spy"
    if not found.exists():
        raise RuntimeError("py-spy is not installed: make bench installs it with the bench extras")
    return found


async def record(pid: int, seconds: float, rate: int, out: Path) -> asyncio.subprocess.Process:
    """Starts py-spy on `pid` for `seconds`; await .communicate() on the result, then read `out`."""
    args = [str(py_spy()), "record", "-p", str(pid), "-d", str(max(1, round(seconds))), "-r", str(rate)]
    args += ["-f", "raw", "-o", str(out), "--nonblocking"]
    out.parent.mkdir(parents=True, exist_ok=True)
    return await asyncio.create_subprocess_exec(
        *args, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )


def serving_pids(pid: int) -> list[int]:
    """The processes that serve: under `--workers` the children (the parent serves no RPC), else `pid`."""
    found: list[int] = []
    pending = children_of(pid)
    while pending:
        child = pending.pop()
        found.append(child)
        pending += children_of(child)
    return found or [pid]


def frame_key(frame: str) -> tuple[str, str]:
    found = _FRAME.match(frame.strip())
    if found is None:
        return frame.strip(), ""
    return found["function"], found["file"]


Parts = tuple[tuple[str, tuple[str, ...]], ...]


def part_of(files: list[str], parts: Parts = PARTS) -> str:
    """The part of the innermost frame (files from root to leaf) that belongs to a named part."""
    for file in reversed(files):
        for name, markers in parts:
            if any(marker in file for marker in markers):
                return name
    return "other Python"


def summarise(raw: str, by_part: Parts = PARTS) -> dict[str, Any]:
    """Top functions by own and by inclusive samples, and own samples by part (`by_part`), all in % of samples."""
    own: Counter[tuple[str, str]] = Counter()
    inclusive: Counter[tuple[str, str]] = Counter()
    parts: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        # --subprocesses and --threads prefix pseudo-frames without a file: not functions.
        frames = [frame_key(f) for f in stack.split(";") if _FRAME.match(f.strip())]
        if not frames:
            continue
        total += count
        own[frames[-1]] += count
        parts[part_of([file for _, file in frames], by_part)] += count
        for key in set(frames):
            if not any(marker in key[1] for marker in TRUNK_FILES):
                inclusive[key] += count

    def top(counter: Counter[tuple[str, str]]) -> list[dict[str, Any]]:
        return [
            {"function": fn, "file": file, "percent": round(100.0 * n / total, 1)}
            for (fn, file), n in counter.most_common(TOP)
        ]

    return {
        "samples": total,
        "own": top(own),
        "inclusive": top(inclusive),
        "parts": {k: round(100.0 * v / total, 1) for k, v in parts.most_common()} if total else {},
    }


def store_raw(raw: str, path: Path) -> None:
    """Keeps the collapsed stacks beside the results (gzip), for a flame graph later."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(raw.encode()))


async def profile_during(
    pid: int,
    load: Callable[[], Awaitable[Any]],
    seconds: float,
    rate: int,
    out: Path,
    *,
    by_part: Parts = PARTS,
) -> dict[str, Any]:
    """Records the server's serving processes for `seconds` while `load()` keeps them busy; returns the summary.

    `by_part`: how own samples are grouped (the edge's profile names its own parts)."""
    pids = serving_pids(pid)
    parts = [out.with_name(f"{out.stem}.{p}.txt") for p in pids]
    spies = [await record(p, seconds, rate, part) for p, part in zip(pids, parts, strict=True)]
    busy = asyncio.ensure_future(load())
    started, times_before = time.monotonic(), thread_time.snapshot(pids)
    for spy in spies:
        _, stderr = await spy.communicate()
        if spy.returncode != 0:
            busy.cancel()
            raise RuntimeError(f"py-spy failed ({spy.returncode}): {stderr.decode(errors='replace').strip()[-500:]}")
    # The threads' times over the same window: how much of the samples was waiting for a core, not CPU.
    threads = thread_time.between(times_before, thread_time.snapshot(pids), time.monotonic() - started)
    await busy
    summary = await asyncio.to_thread(_keep_raw, parts, out, by_part)
    summary.update({"seconds": seconds, "rate": rate, "processes": len(pids), "raw": out.with_suffix(".txt.gz").name})
    if threads:
        summary["threads"] = threads
    log.info("profile %s: %d samples; top own: %s", out.stem, summary["samples"], _first(summary))
    return summary


def _keep_raw(parts: list[Path], out: Path, by_part: Parts = PARTS) -> dict[str, Any]:
    """Summarises py-spy's output files (one per process), keeps them gzipped as one, removes the plain ones."""
    raw = ""
    for part in parts:
        if part.exists():
            raw += part.read_text()
            part.unlink()
    store_raw(raw, out.with_suffix(".txt.gz"))
    return summarise(raw, by_part)


def _first(summary: dict[str, Any]) -> str:
    return ", ".join(f"{t['function']} {t['percent']:.0f}%" for t in summary["own"][:3])
