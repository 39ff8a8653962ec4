"""pg-boss and graphile-worker beside inboxd: each in its own Node process (bench/peers-node/peer.mjs).

They are Node libraries, so they run in Node, as their users run them; the
process speaks the load generator's protocol (node_load.py), so their CPU and
PostgreSQL's are sampled over the same window as every other figure. Their
versions are pinned in bench/peers-node/package-lock.json and installed by the
benchmark's own set-up (`make bench-peers`), never by `make test`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar, LiteralString

import psycopg

from bench.config import WORKERS
from bench.cpu import CpuProbe, CpuShare
from bench.node_load import run_node
from bench.workload import PAYLOAD

PEERS_NODE = Path(__file__).resolve().parent / "peers-node"
# The figure names' system (enqueue.<name>.<shape>, latency.<name>), and each one's database.
PG_BOSS = "pg-boss"
GRAPHILE_WORKER = "graphile-worker"
NODE_PEERS = (PG_BOSS, GRAPHILE_WORKER)
DATABASES = {PG_BOSS: "pgboss", GRAPHILE_WORKER: "graphile_worker"}
# Jobs not finished after a drain, in each one's own tables: completed jobs stay in pg-boss's (state
# 'completed'), graphile-worker deletes them.
_LEFT: dict[str, LiteralString] = {
    PG_BOSS: "SELECT count(*) FROM pgboss.job WHERE state <> 'completed'",
    GRAPHILE_WORKER: "SELECT count(*) FROM graphile_worker._private_jobs",
}
CLEAR: dict[str, LiteralString] = {
    PG_BOSS: "TRUNCATE pgboss.job",
    GRAPHILE_WORKER: "DELETE FROM graphile_worker._private_jobs",
}
# Queue tables that must be LOGGED, as everyone's are.
TABLES = {PG_BOSS: ("job",), GRAPHILE_WORKER: ("_private_jobs",)}
# How each is configured, for the page (docs/benchmarks.md); peer.mjs is the source.
HOW = {
    PG_BOSS: (
        "enqueue with `send` (one job) and `insert` (many, one statement), a pool of one connection per caller; "
        f"the drain is {WORKERS} loops of `fetch` with batchSize 10, each batch then one `complete` of its ids "
        "(its `work` waits out its polling interval after every fetch, jobs or not: 10 jobs per worker per 0.5 s "
        "at best); latency: one `work` worker at its shortest polling interval, 0.5 s (pg-boss 10 refuses "
        "less, and has no LISTEN; its `notifyWorker` wakes a worker of the same process only, which a sender in "
        "another process cannot call)"
    ),
    GRAPHILE_WORKER: (
        "enqueue with WorkerUtils `addJob` and `addJobs` (many, one statement), a pool of one connection per "
        "caller (`quickAddJob`, now `addJobAdhoc`, makes and drops a pool per call: its docs say a WorkerUtils "
        f"for more than one job); the drain is its runner with concurrentJobs {WORKERS}, the local queue its "
        f"performance page recommends (one fetch locks up to {WORKERS} x 10 jobs, the jobs the others hold at "
        "once) and completions batched (completeJobBatchDelay 0); latency: a runner of one job at a time, no local "
        "queue, woken by LISTEN as it ships"
    ),
}


@dataclass(frozen=True)
class PeerLoad:
    """One run of peer.mjs; see its header for the workloads."""

    script: ClassVar[Path] = PEERS_NODE / "peer.mjs"
    system: str
    workload: str
    url: str
    callers: int = 1
    rows: int = 1
    warmup_s: float = 0.0
    duration_s: float = 0.0
    jobs: int = 0
    workers: int = WORKERS
    batch: int = 10
    rounds: int = 0
    # Latency rounds first run unmeasured.
    warm: int = 5
    # The longest pause before a latency round: a polling worker is caught at every phase of its interval.
    jitter_ms: int = 20
    payload: str = PAYLOAD

    def spec(self) -> dict[str, Any]:
        return asdict(self)


def installed() -> str | None:
    """None when peer.mjs's packages are installed, else why not (the set-up that installs them)."""
    if not (PEERS_NODE / "node_modules" / ".installed").exists():
        return f"the Node peers are not installed: run `make bench-peers` (npm ci in {PEERS_NODE})"
    return None


def jitter_ms(system: str) -> int:
    """pg-boss polls every 0.5 s: its rounds start anywhere in that interval; a LISTENing worker needs no spread."""
    return 520 if system == PG_BOSS else 20


async def _count(url: str, query: LiteralString) -> int:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(query)
        row = await cur.fetchone()
        return int(row[0]) if row else -1


@dataclass
class NodePeer:
    """A Node peer as one of the drain's systems (peers.System): its workers are a Node process, timed there."""

    system: str
    url: str
    probe: CpuProbe | None = None
    name: str = ""
    # The Node process's window of the last drain, and the CPU in it; one_round takes both.
    drain_seconds: float | None = None
    drain_cpu: CpuShare | None = None
    _jobs: int = 0
    _version: str = "?"

    def __post_init__(self) -> None:
        self.name = self.name or self.system

    def version(self) -> str:
        return self._version

    async def setup(self) -> None:
        result = await run_node(PeerLoad(self.system, "setup", self.url), None)
        self._version = str(result.report.get("version", "?"))
        from bench.peers import _require_logged

        await _require_logged(self.url, TABLES[self.system])

    async def enqueue(self, jobs: int) -> None:
        self._jobs = jobs
        await run_node(PeerLoad(self.system, "fill", self.url, jobs=jobs), None)

    async def drain(self) -> int:
        load = PeerLoad(self.system, "drain", self.url, jobs=self._jobs)
        result = await run_node(load, self.probe)
        self.drain_seconds, self.drain_cpu = result.seconds, result.cpu
        return result.units

    async def left(self) -> int:
        return await _count(self.url, _LEFT[self.system])

    async def close(self) -> None:
        pass
