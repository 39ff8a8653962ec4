"""The scenarios' real parts: inboxd replicas, worker processes, clusters of their own, bounded waiting.

Nothing here sleeps blindly: every wait checks a condition and gives up after
a bound, failing the test with what it waited for.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, LiteralString

import psycopg

from inboxd.serving.embedded_pg import EmbeddedPostgres
from inboxd.store.migrate import migrate
from inboxd_client import AsyncInboxClient
from tests.harness import REPO, ServerProcess, eventually, throwaway_postgres

# Each call gets a deadline, so a call that hangs fails the scenario instead of stalling the run.
CALL_DEADLINE = 20.0


def namespace(scenario: str) -> str:
    """A namespace of the scenario's own: scenarios sharing a cluster never see each other's events."""
    return f"rel/{scenario.replace(' ', '-')}/{uuid.uuid4().hex[:10]}"


# -- inboxd and PostgreSQL --


def _stop_server(server: ServerProcess) -> None:
    proc = server.proc
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGCONT)  # a SIGSTOPped server would never see the SIGTERM
    try:
        server.terminate(timeout=15.0)
    except subprocess.TimeoutExpired:
        server.kill()


@contextlib.asynccontextmanager
async def serving(url: str, **env: str) -> AsyncIterator[ServerProcess]:
    """`inboxd serve` in a process of its own against `url`; stopped (or killed) on exit."""
    server = ServerProcess(database_url=url, env=env)
    await asyncio.to_thread(server.start)
    try:
        yield server
    finally:
        await asyncio.to_thread(_stop_server, server)


def _pg_ctl(pg: EmbeddedPostgres, *args: str) -> None:
    """pg_ctl as the cluster's owner, through runuser rather than subprocess's `user=`.

    `user=` makes subprocess fork() instead of vfork(), and fork() runs gRPC's
    fork handlers: the test process imported grpc before inboxd could turn
    them off, and under live gRPC traffic the forked child can crash before it
    execs (seen: pg_ctl "exit -11"). vfork() runs no handlers.
    """
    argv = [str(pg.bin_dir / "pg_ctl"), "-D", str(pg.data_dir), *args]
    if os.geteuid() == 0:
        argv = ["runuser", "-u", "postgres", "--", *argv]
    done = subprocess.run(argv, capture_output=True, text=True, cwd="/", check=False)
    if done.returncode != 0:
        raise AssertionError(f"pg_ctl {' '.join(args[:3])} failed ({done.returncode}): {done.stderr or done.stdout}")


def crash_postgres(pg: EmbeddedPostgres) -> None:
    """Immediate shutdown: no checkpoint, recovery from the WAL on the next start, as after a crash."""
    _pg_ctl(pg, "-m", "immediate", "-w", "stop")


def stop_postgres(pg: EmbeddedPostgres) -> None:
    """Fast shutdown: sessions are ended, nothing committed is lost."""
    _pg_ctl(pg, "-m", "fast", "-w", "stop")


def start_postgres(pg: EmbeddedPostgres) -> None:
    """Starts a stopped cluster on its port, durable (fsync on), as EmbeddedPostgres does."""
    options = f"-h 127.0.0.1 -c unix_socket_directories= -c max_connections=400 -c shared_buffers=256MB -p {pg.port}"
    _pg_ctl(pg, "-w", "-t", "60", "-l", str(pg.data_dir / "server.log"), "-o", options, "start")


def discard_cluster(pg: EmbeddedPostgres) -> None:
    """Stops the cluster if it runs, and removes its folder (discard_postgres, without fork())."""
    if (pg.data_dir / "postmaster.pid").exists():
        try:
            stop_postgres(pg)
        except AssertionError:
            with contextlib.suppress(AssertionError):  # not running after all, or beyond a clean stop
                crash_postgres(pg)
    shutil.rmtree(pg.data_dir.parent, ignore_errors=True)


@contextlib.asynccontextmanager
async def own_cluster() -> AsyncIterator[EmbeddedPostgres]:
    """A durable, migrated PostgreSQL for one scenario that stops it or changes its settings."""
    pg = await asyncio.to_thread(throwaway_postgres, durable=True)
    try:
        await migrate(pg.conninfo)
        yield pg
    finally:
        await asyncio.to_thread(discard_cluster, pg)


def client(target: str, *, timeout: float = CALL_DEADLINE) -> AsyncInboxClient:
    """A client with gRPC's retries off: the scenario sees every answer, and resends for itself."""
    return AsyncInboxClient(target, retry=None, timeout=timeout)


async def execute(url: str, sql: LiteralString, params: Sequence[Any] | Mapping[str, Any] = ()) -> int:
    """One statement on a connection of its own; answers the rows it changed."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True, connect_timeout=10) as conn:
        cur = await conn.execute(sql, params)
        return cur.rowcount


async def query(url: str, sql: LiteralString, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[tuple[Any, ...]]:
    """One statement on a connection of its own (a second connection, beside inboxd's)."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True, connect_timeout=10) as conn:
        cur = await conn.execute(sql, params)
        return await cur.fetchall() if cur.description else []


async def states(url: str, ns: str) -> dict[str, str]:
    """Event key -> state, for every event of namespace `ns`."""
    rows = await query(url, "SELECT event_key, state FROM inbox_events WHERE namespace = %s", (ns,))
    return {str(key): str(state) for key, state in rows}


async def quiesced(url: str, *, within: float = 15.0) -> None:
    """Waits until no other session is connected: a killed server's backends have finished their last command.

    A SIGKILLed client does not stop the backend serving it. A COMMIT already
    in the backend's socket buffer still commits after the client is dead, so
    the rows a dead server left behind are only known once its sessions are gone.
    """
    others = """
        SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
    """

    async def alone() -> bool:
        [(count,)] = await query(url, others)
        return int(count) == 0

    await eventually(alone, "the killed server's database sessions ended", within=within, every=0.05)


async def conflicts(url: str, ns: str) -> int:
    rows = await query(url, "SELECT count(*) FROM inbox_conflicts WHERE namespace = %s", (ns,))
    return int(rows[0][0])


# -- waiting --


# -- worker processes --


@dataclass
class PyProcess:
    """`python ARGV...` (a script, or -m MODULE) from the repository root; its stdout lines are collected."""

    argv: Sequence[str]
    log_path: Path
    env: Mapping[str, str] = field(default_factory=dict)
    proc: asyncio.subprocess.Process | None = None
    lines: list[str] = field(default_factory=list)
    _reader: asyncio.Task[None] | None = None

    async def start(self) -> PyProcess:
        with self.log_path.open("ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                *self.argv,
                cwd=REPO,
                env={**os.environ, **self.env},
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
            )
        self._reader = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        async for raw in self.proc.stdout:
            self.lines.append(raw.decode().rstrip("\n"))

    @property
    def name(self) -> str:
        return " ".join(self.argv[:2])

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    def lines_starting(self, prefix: str) -> list[str]:
        return [line.removeprefix(prefix) for line in self.lines if line.startswith(prefix)]

    async def line(self, prefix: str, *, within: float = 30.0) -> str:
        """The first stdout line starting with `prefix` (the prefix removed), waiting for it if need be."""

        async def seen() -> bool:
            # Whether it had finished is read first: a finished reader has already collected every line.
            finished = not self.alive and self._reader is not None and self._reader.done()
            if self.lines_starting(prefix):
                return True
            if finished:
                raise AssertionError(
                    f"{self.name} exited ({self.proc.returncode if self.proc else None}) before printing {prefix!r}: "
                    f"see {self.log_path}"
                )
            return False

        await eventually(seen, f"{self.name} printed {prefix!r}", within=within, every=0.02)
        return self.lines_starting(prefix)[0]

    async def json_line(self, prefix: str, *, within: float = 30.0) -> dict[str, Any]:
        document = json.loads(await self.line(prefix, within=within))
        assert isinstance(document, dict)
        return document

    async def tell(self, text: str) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(f"{text}\n".encode())
        await self.proc.stdin.drain()

    def signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    async def kill(self) -> None:
        """SIGKILL, and wait for the process to be gone."""
        if self.proc is None:
            return
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
        await self.proc.wait()
        if self._reader is not None:
            await asyncio.wait({self._reader}, timeout=5.0)

    async def stop(self, *, within: float = 30.0) -> int:
        """SIGTERM (after SIGCONT, in case it is stopped), then the exit code; SIGKILL if it will not go."""
        assert self.proc is not None
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGCONT)
                self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), within)
            except TimeoutError:
                await self.kill()
        if self._reader is not None:
            await asyncio.wait({self._reader}, timeout=5.0)
        assert self.proc.returncode is not None
        return self.proc.returncode


@contextlib.asynccontextmanager
async def processes() -> AsyncIterator[list[PyProcess]]:
    """A list to put started processes in; any still running on exit are killed."""
    started: list[PyProcess] = []
    try:
        yield started
    finally:
        for proc in started:
            await proc.kill()
