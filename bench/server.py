"""`python -m inboxd serve` as a subprocess: its own interpreter (or several, with `--workers`)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bench.cpu import rss_bytes, tree_cpu_seconds, tree_rss_bytes

READY_PREFIX = "inboxd serving on "


@dataclass
class BenchServer:
    """One inboxd server on 127.0.0.1:<free port>; stderr goes to `log_path`."""

    database_url: str
    log_path: Path
    env: Mapping[str, str] = field(default_factory=dict)
    # `--workers N` when the server has it (None: the server's own default, one process).
    workers: int | None = None
    proc: subprocess.Popen[str] | None = None
    port: int = 0

    def start(self, timeout: float = 60.0) -> BenchServer:
        env = {
            **os.environ,
            "DATABASE_URL": self.database_url,
            "INBOXD_LISTEN": "127.0.0.1:0",
            "PYTHONUNBUFFERED": "1",
            **self.env,
        }
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "inboxd", "serve", *(["--workers", str(self.workers)] if self.workers else [])],
                env=env,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"inboxd exited with {self.proc.wait()} before serving; see {self.log_path}")
            if line.startswith(READY_PREFIX):
                self.port = int(line.rsplit(":", 1)[1])
                return self
        raise RuntimeError(f"inboxd did not start serving within {timeout:.0f} s; see {self.log_path}")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cpu_seconds(self) -> float:
        """The whole server: with `--workers`, the parent and every child process."""
        return tree_cpu_seconds(self.pid)

    def rss(self) -> int:
        return tree_rss_bytes(self.pid)

    def peak_rss(self) -> int:
        return rss_bytes(self.pid, "VmHWM")

    def stop(self, timeout: float = 30.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
