"""`python -m inboxd serve` as a subprocess: its own interpreter (or several, with `--workers`).

Started by the test harness's `serve_on_free_port`, the one start-up of a real server process; this
adds what the benchmark needs: `--workers`, a log file, and the CPU and memory of the process tree.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bench.cpu import rss_bytes, tree_cpu_seconds, tree_rss_bytes
from tests.harness import serve_on_free_port


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
        env = {"PYTHONUNBUFFERED": "1", **self.env}
        args = ["--workers", str(self.workers)] if self.workers else []
        self.proc, self.port = serve_on_free_port(
            self.database_url, env, args, timeout=timeout, stderr_log=self.log_path
        )
        return self

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
