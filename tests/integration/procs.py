"""Helpers for integration tests that run inboxd or PostgreSQL in processes of their own.

Everything here waits in bounded loops that check a condition; nothing sleeps blindly.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TypeVar

from inboxd.serving.embedded_pg import find_binaries
from inboxd.store.database import Connection, Database
from tests.harness import await_serving_line

T = TypeVar("T")


async def stored_keys(db: Database, ns: str) -> set[str]:
    """The event keys inbox_events holds for namespace `ns`."""

    async def work(conn: Connection) -> set[str]:
        cur = await conn.execute("SELECT event_key FROM inbox_events WHERE namespace = %s", (ns,))
        return {str(row[0]) for row in await cur.fetchall()}

    return await db.run(work)


async def poll(check: Callable[[], Awaitable[T | None]], *, within: float, interval: float = 0.2) -> T:
    """Calls `check` until it returns something other than None; fails after `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        result = await check()
        if result is not None:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {within} s")
        await asyncio.sleep(interval)


def embedded_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """This process's environment without DATABASE_URL or any INBOXD_* setting, plus `extra`.

    INBOXD_PG_BIN is kept: it only says where the PostgreSQL binaries are.
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if k != "DATABASE_URL" and (not k.startswith("INBOXD_") or k == "INBOXD_PG_BIN")
    }
    env["INBOXD_DATA_DIR"] = str(data_dir)
    env["INBOXD_LISTEN"] = "127.0.0.1:0"
    env.update(extra)
    return env


@dataclass
class Serve:
    """`inboxd serve` (by `command`) with exactly the environment given, its stderr kept in `log_path`."""

    env: Mapping[str, str]
    log_path: Path
    cwd: Path = field(default_factory=lambda: Path("/"))
    command: Sequence[str] = (sys.executable, "-m", "inboxd")
    proc: subprocess.Popen[str] | None = None
    host: str = ""
    port: int = 0
    _log: IO[str] | None = None

    def start(self, timeout: float = 120.0) -> Serve:
        """Starts the process and waits (bounded) for its readiness line on stdout."""
        self._log = self.log_path.open("a", encoding="utf-8")
        self.proc = subprocess.Popen(
            [*self.command, "serve"],
            env=dict(self.env),
            cwd=self.cwd,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        try:
            self.host, self.port = await_serving_line(
                self.proc, timeout=timeout, why_not=lambda: f"\n{self.log_tail()}"
            )
        except RuntimeError as exc:
            raise AssertionError(str(exc)) from None
        return self

    @property
    def target(self) -> str:
        return f"{self.host}:{self.port}"

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM, then the exit code (bounded wait)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_tail(self, lines: int = 40) -> str:
        if self._log is not None:
            self._log.flush()
        try:
            return "\n".join(self.log_path.read_text(encoding="utf-8").splitlines()[-lines:])
        except OSError:
            return ""


def _as_postgres() -> str | None:
    return "postgres" if os.geteuid() == 0 else None


def postgres_running(cluster_dir: Path) -> bool:
    """`pg_ctl status`: exit 0 means a server runs on `cluster_dir` (3 means none does)."""
    status = subprocess.run(
        [str(find_binaries() / "pg_ctl"), "status", "-D", str(cluster_dir)],
        user=_as_postgres(),
        capture_output=True,
        text=True,
        check=False,
        cwd="/",
    )
    return status.returncode == 0


def stop_stray_postgres(cluster_dir: Path) -> None:
    """Cleanup after a failed test: stops (immediate mode) a server left running on `cluster_dir`."""
    if (cluster_dir / "postmaster.pid").exists() and postgres_running(cluster_dir):
        subprocess.run(
            [str(find_binaries() / "pg_ctl"), "stop", "-D", str(cluster_dir), "-m", "immediate", "-w"],
            user=_as_postgres(),
            capture_output=True,
            check=False,
            cwd="/",
        )
