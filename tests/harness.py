"""The test harness's real parts: a throwaway PostgreSQL and inboxd server processes."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from inboxd.serving.embedded_pg import EmbeddedPostgres

REPO = Path(__file__).resolve().parent.parent


async def eventually(
    check: Callable[[], bool | Awaitable[bool]],
    what: str | Callable[[], str],
    *,
    within: float = 15.0,
    every: float = 0.05,
) -> None:
    """Polls `check` (plain or async) until it holds; fails after `within` seconds, naming `what`.

    For states a test cannot be signalled about; bounded, never an open-ended sleep.
    """
    deadline = time.monotonic() + within
    while True:
        outcome = check()
        if inspect.isawaitable(outcome):
            outcome = await outcome
        if outcome:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within:.0f} s: {what if isinstance(what, str) else what()}")
        await asyncio.sleep(every)


@contextlib.contextmanager
def searchable_folder(prefix: str) -> Iterator[Path]:
    """A new folder under /tmp that others may search: as root, a cluster in it runs as `postgres`."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def throwaway_postgres(*, durable: bool = False) -> EmbeddedPostgres:
    """A started cluster in a fresh folder under the system temp dir (reachable as `postgres`)."""
    folder = Path(tempfile.mkdtemp(prefix="inboxd-test-pg-"))
    os.chmod(folder, 0o755)
    pg = EmbeddedPostgres(data_dir=folder / "data", durable=durable)
    pg.start()
    return pg


def discard_postgres(pg: EmbeddedPostgres) -> None:
    try:
        pg.stop()
    finally:
        shutil.rmtree(pg.data_dir.parent, ignore_errors=True)


SERVING_LINE = re.compile(r"^inboxd serving on (?P<host>[^\s]+):(?P<port>\d+)$")


def await_serving_line(
    proc: subprocess.Popen[str], *, timeout: float, why_not: Callable[[], str] = lambda: ""
) -> tuple[str, int]:
    """Waits (at most `timeout` s) for the server's line `inboxd serving on HOST:PORT`; returns HOST and PORT.

    A thread of its own reads stdout, so the deadline holds even while the
    server prints nothing, and keeps reading after the line, so a server that
    writes more never blocks on a full pipe. `why_not()` is added to the error.
    """
    assert proc.stdout is not None
    stdout = proc.stdout
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + timeout
    while (remaining := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=remaining)
        except queue.Empty:
            break
        if line is None:
            raise RuntimeError(f"inboxd exited with {proc.wait()} before serving{why_not()}")
        if match := SERVING_LINE.match(line.rstrip("\n")):
            return match.group("host"), int(match.group("port"))
    raise RuntimeError(f"inboxd did not print its serving line within {timeout:.0f} s{why_not()}")


def serve_on_free_port(
    database_url: str,
    env: Mapping[str, str],
    args: Sequence[str] = (),
    *,
    timeout: float,
    stderr_log: Path | None = None,
) -> tuple[subprocess.Popen[str], int]:
    """`python -m inboxd serve [args]` on a free port of 127.0.0.1 against `database_url`; returns it and its port.

    `env` goes over this process's environment. stderr is dropped, or appended to `stderr_log`
    (then named in the error when the server does not come up). The benchmark starts its servers here too.
    """
    full_env = {**os.environ, "DATABASE_URL": database_url, "INBOXD_LISTEN": "127.0.0.1:0", **env}
    with contextlib.ExitStack() as stack:
        stderr: IO[bytes] | int = stack.enter_context(stderr_log.open("ab")) if stderr_log else subprocess.DEVNULL
        proc = subprocess.Popen(
            [sys.executable, "-m", "inboxd", "serve", *args],
            env=full_env,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    try:
        _, port = await_serving_line(proc, timeout=timeout, why_not=lambda: f"; see {stderr_log}" if stderr_log else "")
    except RuntimeError:
        proc.kill()
        proc.wait()
        raise
    return proc, port


@dataclass
class ServerProcess:
    """`inboxd serve` in its own process, for tests that kill it or run several replicas."""

    database_url: str
    env: Mapping[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[str] | None = None
    port: int = 0

    def start(self, timeout: float = 30.0) -> ServerProcess:
        # No lease rescuer nor destinations unless asked: the test database is shared with servers on hand-moved clocks.
        env = {"INBOXD_RESCUE_INTERVAL": "0", "INBOXD_DESTINATIONS_POLL": "0", **self.env}
        self.proc, self.port = serve_on_free_port(self.database_url, env, timeout=timeout)
        return self

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def terminate(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        self.proc.terminate()
        return self.proc.wait(timeout)
