"""`make bench-peers`: inboxd beside PgQueuer, Procrastinate, pg-boss and graphile-worker: enqueue, drain, latency."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from bench import grpc_load, support
from bench.cluster import execute
from bench.node_peers import CLEAR, DATABASES, HOW, NODE_PEERS, NodePeer, PeerLoad, installed
from bench.peer_enqueue import ENQUEUE_NS, inboxd_python_steps, pgqueuer_steps, procrastinate_steps
from bench.peer_latency import latency_phase
from bench.peer_work import DESCRIPTION, InboxdWork
from bench.peers import Inboxd, PgQueuer, Procrastinate, System, one_round
from bench.run import Run
from bench.workload import CLEAR_EVENTS

log = logging.getLogger("bench")

Phase = Callable[[Run], Awaitable[None]]
PEER_DATABASES = ("pgqueuer", "procrastinate")


def peer_phases() -> list[tuple[str, Phase]]:
    urls: dict[str, str] = {}
    # The Node peers run when their packages are installed (the benchmark's set-up does it), else the page says why.
    node_peers: list[str] = []

    async def setup(run: Run) -> None:
        for name in PEER_DATABASES:
            urls[name] = await run.cluster.create(name, inboxd_schema=False)
        # The drain's systems install their schemas; the enqueue figures use the same tables.
        for system in (PgQueuer(urls["pgqueuer"]), Procrastinate(urls["procrastinate"])):
            await system.setup()
            await system.close()
        missing = installed()
        if missing is not None:
            log.warning("%s", missing)
            run.extra["node_peers_missing"] = missing
            return
        versions: dict[str, str] = {}
        for name in NODE_PEERS:
            urls[name] = await run.cluster.create(DATABASES[name], inboxd_schema=False)
            peer = NodePeer(name, urls[name])
            await peer.setup()
            versions[name] = peer.version()
        node_peers.extend(NODE_PEERS)
        run.extra["node_peer_versions"] = versions
        run.extra["node_peer_config"] = dict(HOW)

    async def enqueue(run: Run) -> None:
        await enqueue_phase(run, urls, node_peers)

    async def drain(run: Run) -> None:
        await drain_phase(run, urls, node_peers)

    async def latency(run: Run) -> None:
        await latency_phase(run, urls, bool(node_peers))

    return [("setup", setup), ("enqueue", enqueue), ("drain", drain), ("latency", latency)]


async def enqueue_phase(run: Run, urls: dict[str, str], node_peers: list[str]) -> None:
    c = run.config
    shapes = [(callers, 1, "single", "tx/s") for callers in c.peer_enqueue_callers]
    shapes.append((c.batch_clients, c.batch_rows, f"batch{c.batch_rows}", "rows/s"))
    async with grpc_load.stubs(run.target) as (stub,):
        for callers, rows, shape, unit in shapes:
            suffix = f"{shape}.c{callers}"
            workload = "accept" if rows == 1 else "accept_batch"
            load = run.node(workload, callers, namespace=ENQUEUE_NS, rows=rows, prefix=f"peers-{suffix}")
            await run.measure_node(f"enqueue.inboxd.{suffix}", load, unit)
            steps = inboxd_python_steps(stub, callers, rows, f"peers-python-{suffix}")
            await run.measure_steps(f"enqueue.inboxd-python.{suffix}", steps, unit)
            async with pgqueuer_steps(urls["pgqueuer"], callers, rows) as steps:
                await run.measure_steps(f"enqueue.pgqueuer.{suffix}", steps, unit)
            async with procrastinate_steps(urls["procrastinate"], callers, rows) as steps:
                await run.measure_steps(f"enqueue.procrastinate.{suffix}", steps, unit)
            for name in node_peers:
                peer = PeerLoad(
                    name, "enqueue", urls[name], callers=callers, rows=rows, warmup_s=c.warmup, duration_s=c.duration
                )
                await run.measure_node(f"enqueue.{name}.{suffix}", peer, unit)
    # The drain counts what is left in each queue: nothing of these may remain.
    await execute(run.url, CLEAR_EVENTS)
    await execute(urls["pgqueuer"], "TRUNCATE pgqueuer, pgqueuer_log")
    await execute(urls["procrastinate"], "TRUNCATE procrastinate_jobs CASCADE")
    for name in node_peers:
        await execute(urls[name], CLEAR[name])


async def drain_phase(run: Run, urls: dict[str, str], node_peers: list[str]) -> None:
    config = run.config
    rounds: list[dict[str, Any]] = []
    async with grpc_load.stubs(run.target) as (stub,), grpc_load.channel(run.target) as channel:
        complete_batch = None
        if support.lacks(run.support, support.COMPLETE_BATCH) is None:
            complete_batch = grpc_load.complete_batch_call(channel)
        carry = support.lacks(run.support, support.CLAIM_CARRIES) is None
        if carry:
            run.extra["inboxd_drain"] = "Claim(max_events=10) carrying the previous batch's completions"
        elif complete_batch is not None:
            run.extra["inboxd_drain"] = "Claim(max_events=10), then one CompleteBatch"
        else:
            run.extra["inboxd_drain"] = "Claim(max_events=10), then Complete each"
        systems: list[System] = [
            Inboxd(stub, run.url, complete_batch, carry=carry),
            PgQueuer(urls["pgqueuer"]),
            Procrastinate(urls["procrastinate"]),
            *(NodePeer(name, urls[name], probe=run.probe) for name in node_peers),
        ]
        missing = support.lacks(run.support, support.WORK)
        if missing is None:
            systems.insert(
                1, InboxdWork(stub, run.url, target=run.target, transport=run.config.transport, probe=run.probe)
            )
            run.extra["inboxd_work_drain"] = DESCRIPTION
        else:
            log.info("the drain through Work: not served: %s", missing)
        for system in systems:
            await system.setup()
            log.info("-- %s: priming with %d jobs --", system.name, config.peer_priming_jobs)
            await one_round(system, config.peer_priming_jobs, run.probe)
        for round_no in range(config.peer_rounds):
            for system in systems:
                result = await one_round(system, config.peer_jobs, run.probe)
                log.info(
                    "%-14s round %d: enqueue %.1f s, drain %.1f s: %.0f jobs/s",
                    system.name,
                    round_no + 1,
                    result.enqueue_s,
                    result.drain_s,
                    result.jobs_per_s,
                )
                rounds.append({"round": round_no + 1, **result.to_json()})
        for system in systems:
            await system.close()
    run.extra["rounds"] = rounds
