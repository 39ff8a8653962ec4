"""`make bench-peers`: inboxd beside PgQueuer and Procrastinate, enqueue first, then the drain."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from bench import grpc_load, support
from bench.cluster import execute
from bench.peer_enqueue import ENQUEUE_NS, inboxd_python_steps, pgqueuer_steps, procrastinate_steps
from bench.peer_work import DESCRIPTION, InboxdWork
from bench.peers import Inboxd, PgQueuer, Procrastinate, System, one_round
from bench.run import Run
from bench.workload import CLEAR_EVENTS

log = logging.getLogger("bench")

Phase = Callable[[Run], Awaitable[None]]
PEER_DATABASES = ("pgqueuer", "procrastinate")


def peer_phases() -> list[tuple[str, Phase]]:
    urls: dict[str, str] = {}

    async def setup(run: Run) -> None:
        for name in PEER_DATABASES:
            urls[name] = await run.cluster.create(name, inboxd_schema=False)
        # The drain's systems install their schemas; the enqueue figures use the same tables.
        for system in (PgQueuer(urls["pgqueuer"]), Procrastinate(urls["procrastinate"])):
            await system.setup()
            await system.close()

    async def enqueue(run: Run) -> None:
        await enqueue_phase(run, urls)

    async def drain(run: Run) -> None:
        await drain_phase(run, urls)

    return [("setup", setup), ("enqueue", enqueue), ("drain", drain)]


async def enqueue_phase(run: Run, urls: dict[str, str]) -> None:
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
    # The drain counts what is left in each queue: nothing of these may remain.
    await execute(run.url, CLEAR_EVENTS)
    await execute(urls["pgqueuer"], "TRUNCATE pgqueuer, pgqueuer_log")
    await execute(urls["procrastinate"], "TRUNCATE procrastinate_jobs CASCADE")


async def drain_phase(run: Run, urls: dict[str, str]) -> None:
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
