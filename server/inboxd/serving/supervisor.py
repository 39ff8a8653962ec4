"""`inboxd serve --workers N`: N server processes on one port, and the parent that keeps them.

One Python process serves gRPC on one core. Under `--workers N` the parent
starts N fresh interpreters (`python -m inboxd.serving.server_child`: gRPC must never
be forked once initialised), each with its own event loop, pool and gRPC
server bound to the same port with SO_REUSEPORT; the kernel spreads
connections among them. The parent serves no RPC. It owns what must happen
once per instance: the database (started and migrated by the caller before
`run`, stopped after it), the Stats gauges, retention, the lease rescuer,
the console, and the one /metrics endpoint, which reads every child's counters from prometheus_client's
multiprocess files. It restarts a child that dies, with a backoff, and on
SIGTERM or SIGINT drains every child before it returns.

With `:0` in INBOXD_LISTEN the children cannot each pick a port, so the
parent picks one first and keeps it reserved with a bound (never listening)
SO_REUSEPORT socket of its own, which also lets a restarted child bind it
again while its siblings keep serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from inboxd.background.duties import InstanceDuties, parent_duties
from inboxd.config.settings import ConfigError, Settings
from inboxd.config.tokens import TokenRegistry, TokensFileError
from inboxd.console import Console, start_console
from inboxd.observability.metrics import multiprocess_registry
from inboxd.serving.server import server_certificates
from inboxd.serving.server_child import READY, ChildSpec
from inboxd.serving.tokens_admin import token_expiry_gauges
from inboxd.store.database import Database
from inboxd.store.notifications import ReplicaSignals
from inboxd.usecases.inbox import Inbox, database_clock

log = logging.getLogger("inboxd")

CHILD_READY_TIMEOUT = 60.0
RESTART_BACKOFF_FIRST = 1.0
RESTART_BACKOFF_CAP = 30.0
# A child that served at least this long before dying is restarted after the first backoff again.
STEADY_SECONDS = 60.0
# Beyond the shutdown grace, how long a child may take to close its pool and exit before SIGKILL.
EXIT_MARGIN_SECONDS = 5.0
# The parent's own connections: the Stats query (one at a time) and retention's.
PARENT_POOL_SIZE = 3


class ChildFailed(RuntimeError):
    """A server process exited, or did not report ready in time."""


def reserve_port(listen: str) -> socket.socket:
    """A bound SO_REUSEPORT socket on `listen`'s address (port 0: one the kernel picks); never listens."""
    host, _, port = listen.rpartition(":")
    try:
        infos = socket.getaddrinfo(
            host.strip("[]") or None, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        family, kind, proto, _, address = infos[0]
        sock = socket.socket(family, kind, proto)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"INBOXD_LISTEN={listen!r}: {exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {listen}: {exc.strerror or exc}") from None
    return sock


def _exit_reason(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
        return f"signal {-code}"
    return f"exit code {code}"


@dataclass
class ChildProcess:
    """One server process: started, watched, restarted by the supervisor."""

    spec: ChildSpec
    env: dict[str, str]
    proc: asyncio.subprocess.Process | None = None
    started_at: float = 0.0

    @property
    def index(self) -> int:
        return self.spec.index

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc is not None else 0

    async def start(self) -> None:
        """Starts the process and waits (bounded) until it serves; ChildFailed otherwise."""
        self.close_stdin()  # a previous run's, if any
        try:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "inboxd.serving.server_child",
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=self.env,
                # Its own session: a Ctrl-C reaches the parent, which drains the children in order.
                start_new_session=True,
            )  # fmt: skip
            self.started_at = time.monotonic()
            assert self.proc.stdin is not None and self.proc.stdout is not None
            # stdin stays open for the child's life: its end tells the child that the parent is gone.
            self.proc.stdin.write(self.spec.encode())
            await self.proc.stdin.drain()
        except OSError as exc:  # could not start it, or it died before reading its spec
            raise ChildFailed(f"server process {self.index} could not start: {exc}") from None
        assert self.proc.stdout is not None
        try:
            ready = await asyncio.wait_for(self._ready(), CHILD_READY_TIMEOUT)
        except TimeoutError:
            self.kill()
            raise ChildFailed(f"server process {self.index} did not serve within {CHILD_READY_TIMEOUT:.0f} s") from None
        if not ready:
            code = await self.proc.wait()
            raise ChildFailed(f"server process {self.index} exited before serving ({_exit_reason(code)})")
        log.info("server process %d serving (pid %d)", self.index, self.pid)

    async def _ready(self) -> bool:
        """True once the child says it serves; False if its stdout ends first (it exited)."""
        assert self.proc is not None and self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            if line.decode(errors="replace").strip() == READY:
                return True
        return False

    def signal(self, sig: signal.Signals) -> None:
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)

    def close_stdin(self) -> None:
        if self.proc is not None and self.proc.stdin is not None:
            self.proc.stdin.close()

    async def wait(self) -> int:
        assert self.proc is not None
        return await self.proc.wait()


class Supervisor:
    def __init__(
        self, settings: Settings, database_url: str, stop: asyncio.Event, registry: TokenRegistry | None = None
    ) -> None:
        self.settings = settings
        # For the console, which the parent serves; each child reads the tokens file itself.
        self.registry = registry
        self.database_url = database_url
        self.stop = stop
        self.children: list[ChildProcess] = []
        self._stopping = False

    async def run(self) -> None:
        """Serves until `stop` is set, then drains every child; prints the readiness line once all serve."""
        settings = self.settings
        server_certificates(settings)  # an unreadable TLS file stops start-up here, not in N children
        reserved = reserve_port(settings.listen)
        port = int(reserved.getsockname()[1])
        host = settings.listen.rpartition(":")[0]
        metrics_dir = Path(tempfile.mkdtemp(prefix="inboxd-metrics-"))
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}
        # /metrics and the console are served once, here in the parent.
        child_settings = replace(settings, listen=f"{host}:{port}", metrics_listen=None, console_listen=None)
        self.children = [
            ChildProcess(ChildSpec(index, child_settings, self.database_url), env) for index in range(settings.workers)
        ]
        db = Database(self.database_url, min_size=1, max_size=PARENT_POOL_SIZE)
        inbox: Inbox | None = None
        duties: InstanceDuties | None = None
        console: Console | None = None
        keepers: list[asyncio.Task[None]] = []
        try:
            await db.open()
            inbox = Inbox(db, settings, database_clock)
            # The rescuer and the console's Replay make events claimable here, where no Claim waits:
            # the children's waiting Claims hear of them through PostgreSQL NOTIFY, which the parent only sends.
            inbox.signals = ReplicaSignals(db.conninfo, inbox.on_replica_signal)
            inbox.signals.start(listen=False)
            duties = parent_duties(inbox, multiprocess_registry(metrics_dir))
            duties.registry.register(token_expiry_gauges(self.registry))
            await duties.start()
            console = await start_console(settings, duties.operators, self.registry)
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self._forward_sighup)
            if not await self._start_all():
                return
            log.info("%d server processes serving on %s:%d", len(self.children), host, port)
            print(f"inboxd serving on {host}:{port}", flush=True)
            keepers = [asyncio.create_task(self._keep(child)) for child in self.children]
            await self.stop.wait()
        finally:
            self._stopping = True
            for keeper in keepers:
                keeper.cancel()
            await asyncio.gather(*keepers, return_exceptions=True)
            await self._drain()
            if console is not None:
                await console.stop()
            if duties is not None:
                await duties.stop()
            if inbox is not None and inbox.signals is not None:
                await inbox.signals.stop()
            await db.close()
            reserved.close()
            shutil.rmtree(metrics_dir, ignore_errors=True)

    async def _start_all(self) -> bool:
        """Starts every child; False when `stop` came first. A child that cannot start stops start-up."""
        starting = [asyncio.create_task(child.start()) for child in self.children]
        stopped = asyncio.create_task(self.stop.wait())
        while not stopped.done() and not all(task.done() for task in starting):
            await asyncio.wait([*starting, stopped], return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if not all(task.done() for task in starting):
            for task in starting:
                task.cancel()
            await asyncio.gather(*starting, return_exceptions=True)
            return False
        failures = [failure for task in starting if (failure := task.exception()) is not None]
        for failure in failures:
            if not isinstance(failure, ChildFailed):
                raise failure
        if failures:
            raise SystemExit(f"inboxd: {failures[0]}; see its log lines above")
        return True

    async def _keep(self, child: ChildProcess) -> None:
        """Restarts `child` whenever it dies, waiting longer after each quick death."""
        backoff = RESTART_BACKOFF_FIRST
        while not self._stopping:
            code = await child.wait()
            if self._stopping:
                return
            served = time.monotonic() - child.started_at
            if served >= STEADY_SECONDS:
                backoff = RESTART_BACKOFF_FIRST
            log.error(
                "server process %d (pid %d) died (%s) after %.0f s; restarting it in %.0f s",
                child.index, child.pid, _exit_reason(code), served, backoff,
            )  # fmt: skip
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, RESTART_BACKOFF_CAP)
            try:
                await child.start()
            except ChildFailed as exc:
                log.error("%s", exc)

    async def _drain(self) -> None:
        """SIGTERM to every child: each finishes its in-flight calls within the grace; SIGKILL after."""
        live = [child for child in self.children if child.proc is not None and child.proc.returncode is None]
        if live:
            log.info(
                "shutting down: %d server processes finish their in-flight calls for up to %s",
                len(live), self.settings.shutdown_grace,
            )  # fmt: skip
        for child in live:
            child.signal(signal.SIGTERM)
        limit = self.settings.shutdown_grace.total_seconds() + EXIT_MARGIN_SECONDS
        if live:
            await asyncio.wait([asyncio.create_task(child.wait()) for child in live], timeout=limit)
        for child in live:
            if child.proc is not None and child.proc.returncode is None:
                log.error(
                    "server process %d (pid %d) did not stop in %.0f s; killing it", child.index, child.pid, limit
                )
                child.kill()
                await child.wait()
        for child in self.children:
            child.close_stdin()

    def _forward_sighup(self) -> None:
        if self.registry is not None:  # the console's tokens, read here in the parent
            try:
                self.registry.reload()
            except TokensFileError as exc:
                log.error("console: tokens file not reloaded, the previous tokens stay in force: %s", exc)
        for child in self.children:
            child.signal(signal.SIGHUP)
