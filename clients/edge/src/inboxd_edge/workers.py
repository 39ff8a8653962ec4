"""`inboxd-edge --workers N`: N edge processes on one port, and the parent that keeps them.

One Python process is one core. The parent starts N fresh interpreters
(`python -m inboxd_edge ... --worker`, never a fork: gRPC must not be forked
once initialised), each with its own event loop, channels and listener bound
to the same port with SO_REUSEPORT; the kernel spreads connections among
them. With port 0 the parent first reserves one with a bound, never
listening, SO_REUSEPORT socket. The parent serves no webhook: it forwards
SIGHUP to every child (each reloads its routes), serves the one `/metrics`
from prometheus_client's multiprocess files, restarts a child that dies
(after RESTART_SECONDS), and on SIGTERM or SIGINT stops them all. A child
stops when its stdin closes: its parent is gone.
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
from collections.abc import Sequence
from pathlib import Path

from inboxd_edge.config import ConfigError

log = logging.getLogger("inboxd_edge")

READY_PREFIX = b"inboxd-edge listening on "
READY_TIMEOUT_SECONDS = 60.0
RESTART_SECONDS = 1.0
STOP_SECONDS = 30.0


def reserve_port(listen: str) -> socket.socket:
    """A bound SO_REUSEPORT socket on `listen` (port 0: one the kernel picks); it never listens."""
    host, _, port = listen.rpartition(":")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host.strip("[]") or None, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot listen on {listen}: {exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {listen}: {exc.strerror or exc}") from None
    return sock


class Workers:
    """The parent of `count` edge processes started with `child_args` (the command's own, plus the port)."""

    def __init__(self, count: int, child_args: Sequence[str], listen: str, stop: asyncio.Event) -> None:
        self.count = count
        self.child_args = list(child_args)
        self.listen = listen
        self.stop = stop
        self.children: list[asyncio.subprocess.Process | None] = [None] * count
        self._stopping = False

    async def run(self, metrics_listen: str | None) -> None:
        """Serves until `stop` is set; prints the readiness line once every child serves."""
        reserved = reserve_port(self.listen)
        host = self.listen.rpartition(":")[0] or "127.0.0.1"
        port = int(reserved.getsockname()[1])
        folder = Path(tempfile.mkdtemp(prefix="inboxd-edge-metrics-"))
        # Before any child starts, and before this process serves /metrics: both read it.
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(folder)
        env = {**os.environ}
        args = [*self.child_args, "--listen", f"{host}:{port}", "--worker"]
        metrics = None
        keepers: list[asyncio.Task[None]] = []
        try:
            await asyncio.gather(*(self._start(i, args, env) for i in range(self.count)))
            if metrics_listen:
                from inboxd_edge.edge_metrics import start_metrics

                metrics, metrics_port = await start_metrics(metrics_listen)
                log.info("metrics on %s (port %d), for all %d edge processes", metrics_listen, metrics_port,
                         self.count)  # fmt: skip
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self._forward, signal.SIGHUP)
            log.info("%d edge processes serving on %s:%d", self.count, host, port)
            print(f"inboxd-edge listening on {host}:{port}", flush=True)
            keepers = [asyncio.create_task(self._keep(i, args, env)) for i in range(self.count)]
            await self.stop.wait()
        finally:
            self._stopping = True
            for keeper in keepers:
                keeper.cancel()
            await asyncio.gather(*keepers, return_exceptions=True)
            await self._stop_all()
            if metrics is not None:
                await metrics.cleanup()
            reserved.close()
            shutil.rmtree(folder, ignore_errors=True)

    async def _start(self, index: int, args: list[str], env: dict[str, str]) -> None:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "inboxd_edge", *args, env=env, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        self.children[index] = proc
        assert proc.stdout is not None
        try:
            line = await asyncio.wait_for(proc.stdout.readline(), READY_TIMEOUT_SECONDS)
        except TimeoutError:
            line = b""
        if not line.startswith(READY_PREFIX):
            raise ConfigError(f"edge process {index} did not start (exit {proc.returncode}); see its lines above")

    async def _keep(self, index: int, args: list[str], env: dict[str, str]) -> None:
        """Starts the child again whenever it dies."""
        while not self._stopping:
            proc = self.children[index]
            assert proc is not None
            code = await proc.wait()
            if self._stopping:
                return
            log.error("edge process %d (pid %d) exited (%s); starting it again in %.0f s", index, proc.pid, code,
                      RESTART_SECONDS)  # fmt: skip
            await asyncio.sleep(RESTART_SECONDS)
            with contextlib.suppress(ConfigError):
                await self._start(index, args, env)

    def _forward(self, sig: int) -> None:
        for proc in self.children:
            if proc is not None and proc.returncode is None:
                proc.send_signal(sig)

    async def _stop_all(self) -> None:
        self._forward(signal.SIGTERM)
        for proc in self.children:
            if proc is None:
                continue
            try:
                await asyncio.wait_for(proc.wait(), STOP_SECONDS)
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def stop_when_parent_goes(stop: asyncio.Event) -> None:
    """A child's watch on its stdin: the parent holds it open for as long as it lives."""
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    await reader.read()
    stop.set()
