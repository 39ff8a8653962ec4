"""Enqueue -> a waiting worker starts the job, on an idle queue: inboxd and every peer, rounds of one job.

Each round pauses, enqueues one job and times from the enqueue call to the
moment a worker that was waiting starts it (its handler runs; for inboxd, the
Claim that was waiting answers, or the Work stream is pushed the event). From
the call, not its answer: a worker woken by NOTIFY in the same process can
start the job before the caller has read the answer (graphile-worker did, by
4 ms), and the commit's flush is then in every system's figure alike. The
waiting worker is each system's own: inboxd's long-poll Claim and its Work
stream, PgQueuer's QueueManager and Procrastinate's worker (both LISTEN), in
this process; pg-boss's `work` (it polls) and graphile-worker's runner
(LISTEN), in their Node process (node_peers.py). A few rounds first are not
measured: the first jobs pay for connections and plans.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Coroutine
from datetime import timedelta
from typing import Any

from google.protobuf.duration_pb2 import Duration

from bench import grpc_load, support
from bench.grpc_load import Stub
from bench.node_load import run_node
from bench.node_peers import NODE_PEERS, PeerLoad, jitter_ms
from bench.run import Run
from bench.work_streams import work_stream
from bench.workload import PAYLOAD, PAYLOAD_BYTES, Keys
from inboxd_client.v1 import inbox_pb2

log = logging.getLogger("bench")

LATENCY_NS = "bench/peers-latency"
WARM_ROUNDS = 5
ROUND_TIMEOUT = 10.0


def figure(latencies_s: list[float], **extra: Any) -> dict[str, Any]:
    """A latency figure: its value is the p99 (the target's), in ms, with the p50 beside it."""
    summary = {k: round(v, 3) for k, v in grpc_load.summarize_ms(latencies_s).items()}
    return {"value": summary["p99_ms"], "unit": "ms", "rounds": len(latencies_s), **summary, **extra}


async def python_rounds(
    enqueue: Callable[[], Awaitable[None]], started: asyncio.Queue[float], rounds: int
) -> list[float]:
    """Seconds from each enqueue call to the start of its job, as the worker put it on `started`."""
    found: list[float] = []
    for _ in range(rounds):
        # Long enough for the worker to be waiting again; varied, so no timer of a worker's is in step.
        await asyncio.sleep(0.02 + 0.02 * random.random())
        if not started.empty():
            raise RuntimeError("a worker started a job before anything was enqueued")
        called = time.perf_counter()
        await enqueue()
        async with asyncio.timeout(ROUND_TIMEOUT):
            began = await started.get()
        found.append(began - called)
    return found


async def inboxd_claim_latencies(waiting: Stub, accepting: Stub, keys: Keys, rounds: int) -> list[float]:
    """A worker whose Claim (max_events 1) waits; it starts an event when that Claim answers, then Completes it."""
    started: asyncio.Queue[float] = asyncio.Queue()
    claim = inbox_pb2.ClaimRequest(
        namespaces=[LATENCY_NS], max_events=1, wait=Duration(seconds=10), worker_id="bench-peers-latency"
    )

    async def worker() -> None:
        while True:
            for e in (await waiting.Claim(claim)).events:
                started.put_nowait(time.perf_counter())
                await waiting.Complete(
                    inbox_pb2.CompleteRequest(namespace=e.namespace, event_key=e.event_key, claim_token=e.claim_token)
                )

    async def enqueue() -> None:
        await accepting.Accept(grpc_load.accept_request(LATENCY_NS, keys.next()))

    return await _with_worker(worker(), enqueue, started, rounds)


async def inboxd_work_latencies(waiting: Stub, accepting: Stub, keys: Keys, rounds: int) -> list[float]:
    """A worker's Work stream waiting with credit 1; it starts an event when it is pushed, then completes it there."""
    started: asyncio.Queue[float] = asyncio.Queue()

    async def enqueue() -> None:
        await accepting.Accept(grpc_load.accept_request(LATENCY_NS, keys.next()))

    async with work_stream(waiting, [LATENCY_NS], credit=1, worker_id="bench-peers-latency") as stream:

        async def worker() -> None:
            while True:
                arrived, event = await stream.pushed.get()
                started.put_nowait(arrived)
                await stream.complete([event], credit=1)

        return await _with_worker(worker(), enqueue, started, rounds)


async def _with_worker(
    worker: Coroutine[Any, Any, None],
    enqueue: Callable[[], Awaitable[None]],
    started: asyncio.Queue[float],
    rounds: int,
) -> list[float]:
    task = asyncio.ensure_future(worker)
    try:
        await python_rounds(enqueue, started, WARM_ROUNDS)
        return await python_rounds(enqueue, started, rounds)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def pgqueuer_latencies(url: str, rounds: int) -> list[float]:
    """A QueueManager of batch 1 (continuous: it LISTENs) on asyncpg; jobs enqueued on another connection.

    asyncpg, PgQueuer's first driver, hands it each NOTIFY as it arrives. On its psycopg driver, measured,
    a wake-up waited 1 to 2 s every other round: its LISTEN watcher holds the connection for up to its
    1 s timeout, and the dequeue that the NOTIFY starts queues behind it.
    """
    import asyncpg  # type: ignore[import-untyped]
    from pgqueuer import Job, Queries, QueueManager

    started: asyncio.Queue[float] = asyncio.Queue()
    worker_conn = await asyncpg.connect(url)
    enqueue_conn = await asyncpg.connect(url)
    qm = QueueManager(Queries.from_asyncpg_connection(worker_conn))

    @qm.entrypoint("latency")
    async def latency(job: Job) -> None:
        started.put_nowait(time.perf_counter())

    queries = Queries.from_asyncpg_connection(enqueue_conn)

    async def enqueue() -> None:
        await queries.enqueue("latency", PAYLOAD_BYTES, 0)

    task = asyncio.ensure_future(qm.run(batch_size=1, dequeue_timeout=timedelta(seconds=30)))
    try:
        await python_rounds(enqueue, started, WARM_ROUNDS)
        return await python_rounds(enqueue, started, rounds)
    finally:
        qm.shutdown.set()
        await asyncio.wait_for(task, 30)
        await worker_conn.close()
        await enqueue_conn.close()


async def procrastinate_latencies(url: str, rounds: int) -> list[float]:
    """A worker of concurrency 1 with listen_notify (its default); jobs deferred through the same app's pool."""
    import procrastinate

    started: asyncio.Queue[float] = asyncio.Queue()
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url, min_size=2, max_size=2))

    @app.task(name="latency", queue="bench-latency")
    async def latency(payload: str) -> None:
        started.put_nowait(time.perf_counter())

    async def enqueue() -> None:
        await latency.defer_async(payload=PAYLOAD)

    await app.open_async()
    worker = asyncio.ensure_future(
        app.run_worker_async(queues=["bench-latency"], concurrency=1, listen_notify=True, install_signal_handlers=False)
    )
    try:
        await python_rounds(enqueue, started, WARM_ROUNDS)
        return await python_rounds(enqueue, started, rounds)
    finally:
        worker.cancel()
        await asyncio.gather(worker, return_exceptions=True)
        await app.close_async()


async def latency_phase(run: Run, urls: dict[str, str], node_peers: bool) -> None:
    rounds = run.config.peer_latency_rounds
    keys = Keys("peers-latency")
    async with grpc_load.stubs(run.target, channels=2) as (waiting, accepting):
        found = await inboxd_claim_latencies(waiting, accepting, keys, rounds)
        _keep(run, "inboxd", figure(found, worker="a Claim waiting (long-poll), max_events 1"))
        if support.lacks(run.support, support.WORK) is None:
            found = await inboxd_work_latencies(waiting, accepting, keys, rounds)
            _keep(run, "inboxd-work", figure(found, worker="a Work stream waiting with credit 1"))
    found = await pgqueuer_latencies(urls["pgqueuer"], rounds)
    _keep(run, "pgqueuer", figure(found, worker="a QueueManager of batch 1 on asyncpg (it LISTENs)"))
    found = await procrastinate_latencies(urls["procrastinate"], rounds)
    _keep(run, "procrastinate", figure(found, worker="a worker of concurrency 1, listen_notify"))
    if not node_peers:
        return
    for system in NODE_PEERS:
        load = PeerLoad(system, "latency", urls[system], rounds=rounds, warm=WARM_ROUNDS, jitter_ms=jitter_ms(system))
        result = await run_node(load, None)
        r = result.report
        fig = {
            "value": round(float(r["p99_ms"]), 3),
            "unit": "ms",
            "rounds": int(r["ops"]),
            **{k: round(float(r[k]), 3) for k in ("p50_ms", "p90_ms", "p99_ms", "max_ms")},
            # From the call's answer instead, for the record: a worker in the same process may start first.
            **{k: round(float(r[k]), 3) for k in ("answer_p50_ms", "answer_p99_ms")},
        }
        _keep(run, system, fig)


def _keep(run: Run, system: str, fig: dict[str, Any]) -> None:
    run.figures[f"latency.{system}"] = fig
    log.info("%-16s enqueue -> start: p50 %7.2f ms, p99 %7.2f ms", system, fig["p50_ms"], fig["p99_ms"])
