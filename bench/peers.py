"""The same end-to-end job on inboxd and its peers: enqueue N no-op jobs, then drain them.

PgQueuer and Procrastinate are here; pg-boss and graphile-worker, Node libraries,
run in a Node process of their own (node_peers.py, peers-node/peer.mjs).

Same PostgreSQL (durable), same payload, same number of concurrent claimers
(WORKERS), each taking up to BATCH jobs per round trip where the library can:

- inboxd: WORKERS grpc.aio loops of Claim(max_events=BATCH) carrying the
  previous batch's completions when the server takes them, else then one
  CompleteBatch when the server has it, else Complete each; its server
  holds a pool of 20 connections;
- PgQueuer: WORKERS QueueManagers, one asyncpg connection each (its first
  driver; on psycopg it drained at under half the rate), run(batch_size=BATCH,
  mode=drain); completions go through its own batching log buffer;
- Procrastinate: WORKERS workers of concurrency BATCH sharing a pool of 20
  connections; it fetches one job per query, the only way it can.

Each system first drains a small unmeasured round, then the database is
analyzed before every measured drain: plans are made on statistics that
know the tables hold rows, as they would in a system autovacuum has seen.
Peers run their workers inside this process; inboxd's workers run here too,
but its server is a second process: inboxd's design, not a handicap we added.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, LiteralString, Protocol

import psycopg

from bench.cluster import checkpoint, execute
from bench.config import WORKERS
from bench.cpu import CpuProbe, CpuShare
from bench.grpc_load import Stub, accept_batch_steps, claim_complete_steps
from bench.loop import closed_loop
from bench.workload import PAYLOAD, PAYLOAD_BYTES, Keys

BATCH = 10
POOL = 20
ENQUEUE_CHUNK = 1000
DRAIN_CAP_SECONDS = 180.0
REAP_SECONDS = 1.0


@dataclass
class PeerRun:
    system: str
    version: str
    jobs: int
    enqueue_s: float
    drain_s: float
    cpu: CpuShare | None

    @property
    def jobs_per_s(self) -> float:
        return self.jobs / self.drain_s if self.drain_s else 0.0

    def to_json(self) -> dict[str, object]:
        return {
            "system": self.system,
            "version": self.version,
            "jobs": self.jobs,
            "enqueue_s": round(self.enqueue_s, 3),
            "drain_s": round(self.drain_s, 3),
            "jobs_per_s": round(self.jobs_per_s, 1),
            "cpu": self.cpu.to_json() if self.cpu else None,
        }


class System(Protocol):
    name: str
    url: str

    def version(self) -> str: ...

    async def setup(self) -> None: ...

    async def enqueue(self, jobs: int) -> None: ...

    async def drain(self) -> int:
        """Runs the workers until the queue is empty; returns how many jobs they ran."""
        ...

    async def left(self) -> int:
        """Jobs not finished after a drain; 0 when all is well."""
        ...

    async def close(self) -> None: ...


async def one_round(system: System, jobs: int, probe: CpuProbe) -> PeerRun:
    began = time.perf_counter()
    await system.enqueue(jobs)
    enqueue_s = time.perf_counter() - began
    await execute(system.url, "ANALYZE")
    await checkpoint(system.url)
    first = probe.snapshot()
    began = time.perf_counter()
    done = await asyncio.wait_for(system.drain(), DRAIN_CAP_SECONDS)
    # A system whose workers are another process may time its own drain from their start (peer_work.py).
    drain_s = getattr(system, "drain_seconds", None) or time.perf_counter() - began
    # Backends of connections closed at the end of the drain are counted once
    # the postmaster has reaped them: a moment later.
    await asyncio.sleep(REAP_SECONDS)
    cpu = CpuProbe.between(first, probe.snapshot())
    # Likewise its CPU over that window, the generator's own included (peer_work.py).
    cpu = getattr(system, "drain_cpu", None) or CpuShare(drain_s, cpu.used)
    left = await system.left()
    if done != jobs or left:
        raise RuntimeError(f"{system.name} ran {done} of {jobs} jobs; {left} left unfinished")
    return PeerRun(system.name, system.version(), done, enqueue_s, drain_s, cpu)


async def _count(url: str, query: LiteralString) -> int:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(query)
        row = await cur.fetchone()
        return int(row[0]) if row else -1


async def _require_logged(url: str, tables: tuple[str, ...]) -> None:
    """Same durability for everyone: no UNLOGGED queue tables."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT relname FROM pg_class WHERE relname = ANY(%s) AND relpersistence <> 'p'", (list(tables),)
        )
        unlogged = [str(r[0]) for r in await cur.fetchall()]
    if unlogged:
        raise RuntimeError(f"tables {unlogged} are UNLOGGED: the comparison would not be like for like")


@dataclass
class Inboxd:
    stub: Stub
    url: str
    # InboxService.CompleteBatch (grpc_load.complete_batch_call), or None: Complete each.
    complete_batch: Any = None
    # Each Claim carries the previous batch's completions (ClaimRequest.completions).
    carry: bool = False
    name: str = "inboxd"
    # Of each round's namespace and keys: two inboxd systems in one run enqueue apart.
    prefix: str = "peers"
    _round: int = 0
    _namespace: str = ""

    def version(self) -> str:
        return metadata.version("inboxd")

    async def setup(self) -> None:
        pass

    async def enqueue(self, jobs: int) -> None:
        self._round += 1
        self._namespace = f"bench/{self.prefix}-{self._round}"
        keys = Keys(f"{self.prefix}-{self._round}")
        calls = [jobs // 100]
        step = accept_batch_steps(self.stub, 1, self._namespace, keys, 100)[0]

        async def caller() -> None:
            while calls[0] > 0:
                calls[0] -= 1
                await step()

        await asyncio.gather(*(caller() for _ in range(4)))

    async def drain(self) -> int:
        result = await closed_loop(
            claim_complete_steps(self.stub, WORKERS, self._namespace, BATCH, self.complete_batch, carry=self.carry),
            warmup=0.0,
            duration=DRAIN_CAP_SECONDS,
        )
        return result.units

    async def left(self) -> int:
        return await _count(self.url, "SELECT count(*) FROM inbox_events WHERE state <> 'completed'")

    async def close(self) -> None:
        pass


@dataclass
class PgQueuer:
    url: str
    name: str = "PgQueuer"
    _admin: Any = None
    _done: int = 0

    def version(self) -> str:
        return metadata.version("pgqueuer")

    async def setup(self) -> None:
        from pgqueuer import Queries

        self._admin = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
        queries = Queries.from_psycopg_connection(self._admin)
        if not await queries.schema_is_installed():
            await queries.install()
        await _require_logged(self.url, ("pgqueuer", "pgqueuer_log"))

    async def enqueue(self, jobs: int) -> None:
        from pgqueuer import Queries

        queries = Queries.from_psycopg_connection(self._admin)
        for start in range(0, jobs, ENQUEUE_CHUNK):
            n = min(ENQUEUE_CHUNK, jobs - start)
            await queries.enqueue(["noop"] * n, [PAYLOAD_BYTES] * n, [0] * n)

    async def drain(self) -> int:
        """On asyncpg, PgQueuer's first driver: measured on a loaded 2-core machine, 5,000 jobs drained at
        1,888 and 2,414 jobs/s on asyncpg, 888 and 750 on psycopg, whose LISTEN watcher holds each
        connection for up to its 1 s timeout while the dequeue a NOTIFY starts waits behind it."""
        import asyncpg  # type: ignore[import-untyped]
        from pgqueuer import Job, Queries, QueueManager
        from pgqueuer.domain.types import QueueExecutionMode

        self._done = 0
        conns = [await asyncpg.connect(self.url) for _ in range(WORKERS)]
        managers: list[QueueManager] = []
        for conn in conns:
            qm = QueueManager(Queries.from_asyncpg_connection(conn))

            @qm.entrypoint("noop")
            async def noop(job: Job) -> None:
                self._done += 1

            managers.append(qm)
        try:
            await asyncio.gather(*(qm.run(batch_size=BATCH, mode=QueueExecutionMode.drain) for qm in managers))
        finally:
            for conn in conns:
                await conn.close()
        return self._done

    async def left(self) -> int:
        return await _count(self.url, "SELECT count(*) FROM pgqueuer")

    async def close(self) -> None:
        if self._admin is not None:
            await self._admin.close()


@dataclass
class Procrastinate:
    url: str
    name: str = "Procrastinate"
    _app: Any = None
    _task: Any = None
    _done: list[int] = field(default_factory=lambda: [0])

    def version(self) -> str:
        return metadata.version("procrastinate")

    async def setup(self) -> None:
        import procrastinate

        app = procrastinate.App(
            connector=procrastinate.PsycopgConnector(conninfo=self.url, min_size=POOL, max_size=POOL),
        )
        done = self._done

        @app.task(name="noop", queue="bench")
        async def noop(payload: str) -> None:
            done[0] += 1

        self._app, self._task = app, noop
        await self._app.open_async()
        installed = await _count(self.url, "SELECT (to_regclass('procrastinate_jobs') IS NOT NULL)::int")
        if not installed:
            await self._app.schema_manager.apply_schema_async()
        await _require_logged(self.url, ("procrastinate_jobs",))

    async def enqueue(self, jobs: int) -> None:
        for start in range(0, jobs, ENQUEUE_CHUNK):
            n = min(ENQUEUE_CHUNK, jobs - start)
            await self._task.batch_defer_async(*({"payload": PAYLOAD} for _ in range(n)))

    async def drain(self) -> int:
        self._done[0] = 0
        await asyncio.gather(
            *(
                self._app.run_worker_async(
                    queues=["bench"],
                    name=f"bench-{i}",
                    concurrency=BATCH,
                    wait=False,
                    listen_notify=False,
                    install_signal_handlers=False,
                )
                for i in range(WORKERS)
            )
        )
        return self._done[0]

    async def left(self) -> int:
        return await _count(self.url, "SELECT count(*) FROM procrastinate_jobs WHERE status <> 'succeeded'")

    async def close(self) -> None:
        if self._app is not None:
            await self._app.close_async()
