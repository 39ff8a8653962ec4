"""One run: the cluster, the server under test, the CPU probe, and the figures measured so far."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import asdict, replace
from typing import Any

from bench import support
from bench.cluster import BenchCluster, checkpoint
from bench.config import Config
from bench.cpu import OTHER, CpuProbe
from bench.facts import git_revision, machine, node_version, now_utc, versions, wait_for_quiet
from bench.loop import Step, closed_loop
from bench.node_load import NodeLoad, NodeSpec, run_node
from bench.record import from_node, from_throughput
from bench.server import BenchServer

log = logging.getLogger("bench")

# Above this share of one core used by processes that are not ours, a window is called noisy.
NOISY_PERCENT = 20.0


class Run:
    """One `make bench` or `make bench-peers`: what it started, and what it measured."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.cluster = BenchCluster()
        self.probe = CpuProbe()
        self.figures: dict[str, dict[str, Any]] = {}
        self.extra: dict[str, Any] = {}
        self.support: dict[str, dict[str, Any]] = {}
        self.server: BenchServer | None = None
        self.url = ""
        self.raw_url = ""

    @property
    def target(self) -> str:
        assert self.server is not None
        return self.server.target

    def node(self, workload: str, callers: int, **fields: Any) -> NodeLoad:
        """A Node load against the server under test, with this run's window and transport."""
        fields.setdefault("warmup_s", self.config.warmup)
        fields.setdefault("duration_s", self.config.duration)
        return NodeLoad(self.target, workload, callers, transport=self.config.transport, **fields)

    # -- measuring --

    async def measure_node(self, name: str, load: NodeSpec, unit: str, *, retry: bool = True, **extra: Any) -> None:
        async def once() -> None:
            result = await run_node(load, self.probe)
            self._keep(name, from_node(result, unit, **extra))

        await (self.cleanest(name, once) if retry else once())

    async def measure_steps(self, name: str, steps: Sequence[Step], unit: str, *, retry: bool = True) -> None:
        async def once() -> None:
            c = self.config
            result = await closed_loop(steps, warmup=c.warmup, duration=c.duration, probe=self.probe)
            self._keep(name, from_throughput(result, unit))

        await (self.cleanest(name, once) if retry else once())

    def _keep(self, name: str, fig: dict[str, Any]) -> None:
        self.figures[name] = fig
        cpu = fig.get("cpu") or {}
        seconds = cpu.get("seconds") or 0.0
        shares = ", ".join(f"{k} {100 * v / seconds:.0f}%" for k, v in sorted(cpu.get("used", {}).items()) if seconds)
        log.info(
            "%-30s %10.1f %-6s p50 %7.2f ms  p99 %7.2f ms  (%s)%s",
            name,
            fig["value"],
            fig["unit"],
            fig["p50_ms"],
            fig["p99_ms"],
            shares or "no cpu",
            f"  {fig['errors']} errors, first: {fig['first_error']}" if fig["errors"] else "",
        )

    async def cleanest(self, name: str, attempt: Callable[[], Awaitable[None]]) -> None:
        """Runs `attempt` (which records figure `name`) until a quiet window or out of retries; keeps the quietest."""
        kept: tuple[float, dict[str, Any]] | None = None
        tries = 0
        for tries in range(1 + self.config.noisy_retries):
            await checkpoint(self.url)
            await attempt()
            fig = self.figures[name]
            cpu = fig.get("cpu")
            noise = 100 * cpu["used"].get(OTHER, 0.0) / cpu["seconds"] if cpu and cpu["seconds"] else 0.0
            if kept is None or noise < kept[0]:
                kept = (noise, fig)
            if noise < NOISY_PERCENT:
                break
            if tries < self.config.noisy_retries:
                log.info("%s: other processes took %.0f%% of a core; measuring again", name, noise)
        assert kept is not None
        self.figures[name] = kept[1]
        self.figures[name]["attempts"] = tries + 1

    async def unmeasured(self, steps: Sequence[Step], seconds: float) -> None:
        await closed_loop(steps, warmup=0.0, duration=seconds)

    # -- starting and stopping --

    async def start(self) -> None:
        self.extra["busy_before_start"] = await wait_for_quiet(limit=0.0 if self.config.quick else 120.0)
        log.info("starting PostgreSQL (durable) in %s", self.cluster.folder)
        await asyncio.to_thread(self.cluster.start)
        self.probe.watch("postgres", self.cluster.cpu_seconds)
        self.url = await self.cluster.create("inboxd", inboxd_schema=True)
        self.raw_url = await self.cluster.create("inboxd_raw", inboxd_schema=True)
        workers = support.workers_flag()
        # With --workers, the main server is explicitly one process: the figures beside the raw
        # baseline, and the denominator of the --workers 2 figure.
        self.server = await self.start_server(workers=1 if workers["supported"] else None)
        self.probe.watch("server", self.server.cpu_seconds)
        self.support = await support.detect(self.server.target)
        for feature, found in self.support.items():
            log.info("server support: %s: %s (%s)", feature, "yes" if found["supported"] else "no", found["reason"])

    async def start_server(
        self, env: dict[str, str] | None = None, *, workers: int | None = None, url: str | None = None
    ) -> BenchServer:
        log_path = self.cluster.folder / "inboxd.log"
        server = BenchServer(url or self.url, log_path, env or {}, workers=workers)
        return await asyncio.to_thread(server.start)

    async def swap_server(self, server: BenchServer) -> BenchServer:
        """Makes `server` the one under test (and the probe's "server"); returns the one it replaces."""
        assert self.server is not None
        previous, self.server = self.server, server
        self.probe.watch("server", server.cpu_seconds)
        return previous

    @contextlib.asynccontextmanager
    async def fresh_server(self, env: dict[str, str]) -> AsyncIterator[BenchServer]:
        """A new server (one process when --workers exists) under test for the block, stopped after it."""
        workers = 1 if support.lacks(self.support, support.WORKERS) is None else None
        server = await self.start_server(env, workers=workers)
        previous = await self.swap_server(server)
        try:
            yield server
        finally:
            await self.swap_server(previous)
            await asyncio.to_thread(server.stop)

    async def stop(self) -> None:
        if self.server is not None:
            await asyncio.to_thread(self.server.stop)
        await asyncio.to_thread(self.cluster.stop)

    async def facts(self, *extra_versions: str) -> dict[str, Any]:
        config = asdict(replace(self.config))
        return {
            "date": now_utc(),
            "git": git_revision(),
            "machine": machine(),
            "postgres": await self.cluster.facts(),
            "versions": {**versions(*extra_versions), "node": node_version()},
            "loop": self.config.loop,
            "config": config,
        }
