"""What a reader needs to know about the run: the machine, the commit, the versions, how busy it was."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import platform
import subprocess
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.cpu import machine_busy_seconds

log = logging.getLogger("bench")

REPO = Path(__file__).resolve().parent.parent
VERSIONS = ("inboxd", "grpcio", "protobuf", "psycopg", "psycopg-pool")


def now_utc() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def versions(*extra: str) -> dict[str, str]:
    return {name: metadata.version(name) for name in (*VERSIONS, *extra)}


async def wait_for_quiet(limit: float = 120.0, quiet_percent: float = 25.0) -> float:
    """Waits (up to `limit` s) until other processes use under `quiet_percent` of a core; returns the last reading."""
    deadline = time.monotonic() + limit
    while True:
        before, t0 = machine_busy_seconds(), time.monotonic()
        await asyncio.sleep(2.0)
        busy = 100 * (machine_busy_seconds() - before) / (time.monotonic() - t0)
        if busy < quiet_percent or time.monotonic() > deadline:
            if busy >= quiet_percent:
                log.warning("the machine is busy: %.0f%% of a core in use by others; figures will be noisy", busy)
            return round(busy, 1)
        log.info("the machine is busy (%.0f%% of a core in use by others); waiting for it to quieten", busy)


def git_revision() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", "server"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head} (server/ has uncommitted changes)" if dirty else head


def node_version() -> str:
    try:
        return subprocess.run(["node", "--version"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "absent"


def machine() -> dict[str, Any]:
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_kb = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": model,
        "memory_gib": round(mem_kb / 1024 / 1024, 1),
        "kernel": platform.release(),
    }
