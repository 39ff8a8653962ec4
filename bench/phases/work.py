"""The Work stream (issue 27): claim -> complete beside the raw baseline, wake-up latency, recovery after a SIGKILL.

Each phase says "not served" and measures nothing against a server without Work.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from typing import Any

from bench import support
from bench.cpu import CpuProbe
from bench.grpc_load import accept_request, stubs, summarize_ms
from bench.node_load import NodeLoad, next_line, spawn_node
from bench.phases.claim import CLAIM_NS, inboxd_claim_figure, raw_claim_figure
from bench.run import Run
from bench.work_streams import wakeup_latencies, work_stream
from bench.workload import Keys
from inboxd_client.v1 import inbox_pb2

log = logging.getLogger("bench")

WORK_CLAIM = "inboxd.work.c16"
RAW_CLAIM10 = "raw.claim10"
WORK_RECOVERY = "inboxd.work.recovery"
WORK_WAKEUP = "inboxd.work.wakeup"
WAKE_NS = "bench/work-wake"
# Credit per worker stream: the batch of a Claim 10 figure.
CREDIT = 10
# Events the killed worker holds, and how long another worker may take to be pushed them.
HELD = 10
RECOVERY_CAP_SECONDS = 5.0


def not_served(run: Run, phase: str) -> bool:
    missing = support.lacks(run.support, support.WORK)
    if missing is not None:
        log.info("%s: not served: %s", phase, missing)
    return missing is not None


async def work_claim_phase(run: Run) -> None:
    """16 Node workers, one Work stream each (credit 10), over the claim backlog, beside raw claim-10-then-complete."""
    if not_served(run, "work"):
        return
    if RAW_CLAIM10 not in run.figures:
        await raw_claim_figure(run, RAW_CLAIM10, run.raw_url, 10, prefix="raw-claim10")
    load = run.node("work", run.config.claim_workers, namespace=CLAIM_NS, credit=CREDIT, idle_ms=500)
    await inboxd_claim_figure(run, WORK_CLAIM, load, "work-claim")


async def work_wakeup_phase(run: Run) -> None:
    """Consecutive runs of: Accept, its event pushed on a Work stream that waits with credit 1, completed there."""
    if not_served(run, "work-wakeup"):
        return
    c = run.config
    keys = Keys("work-wake")

    def accept() -> inbox_pb2.AcceptRequest:
        return accept_request(WAKE_NS, keys.next())

    runs: list[dict[str, Any]] = []
    async with stubs(run.target, channels=2) as (waiting, accepting), work_stream(waiting, [WAKE_NS], credit=1) as s:
        # A few rounds first: the first pushes pay for plans.
        await wakeup_latencies(s, accepting, accept, 10)
        for index in range(c.wake_runs):
            first = run.probe.snapshot()
            latencies = await wakeup_latencies(s, accepting, accept, c.stream_wake_rounds)
            cpu = CpuProbe.between(first, run.probe.snapshot())
            summary = {k: round(v, 3) for k, v in summarize_ms(latencies).items()}
            runs.append({"run": index + 1, "rounds": len(latencies), **summary, "cpu": cpu.to_json()})
            log.info("Work wake-up run %d: p50 %.2f ms, p99 %.2f ms", index + 1, summary["p50_ms"], summary["p99_ms"])
    worst = max(r["p99_ms"] for r in runs)
    run.figures[WORK_WAKEUP] = {"value": worst, "unit": "ms", "runs": runs, "p99_ms": worst}


async def recovery_phase(run: Run) -> None:
    """A Node worker holding events on its Work stream is SIGKILLed; how long until another worker is pushed them."""
    if not_served(run, "recovery"):
        return
    runs: list[dict[str, Any]] = []
    async with stubs(run.target) as [stub]:
        for index in range(run.config.wake_runs):
            found = await _recover_once(run, stub, f"bench/recovery-{index + 1}")
            runs.append({"run": index + 1, **found})
            log.info("recovery run %d: %s", index + 1, found)
    worst = max(float(r["seconds"]) for r in runs)
    run.figures[WORK_RECOVERY] = {"value": worst, "unit": "s", "runs": runs, "held": HELD}


async def _recover_once(run: Run, stub: Any, namespace: str) -> dict[str, Any]:
    keys = Keys(namespace.replace("/", "-"))
    events = [accept_request(namespace, keys.next()) for _ in range(HELD)]
    await stub.AcceptBatch(inbox_pb2.AcceptBatchRequest(events=events))
    # The holder's lease is the default 30 s: what comes back within a second is the stream's end, not the lease.
    load = NodeLoad(run.target, "work_hold", 1, 0.0, 0.0, namespace=namespace, credit=HELD, lease_s=30)
    holder = await spawn_node(load)
    try:
        held = await next_line(holder, "held", 30.0)
        async with work_stream(stub, [namespace], credit=HELD, worker_id="bench-rescuer") as rescuer:
            if not rescuer.pushed.empty():
                raise RuntimeError("the second worker was pushed events the holder held")
            killed = time.perf_counter()
            os.kill(holder.pid, signal.SIGKILL)
            try:
                async with asyncio.timeout(RECOVERY_CAP_SECONDS):
                    pushed = await rescuer.take(HELD)
            except TimeoutError:
                return {"seconds": RECOVERY_CAP_SECONDS, "timed_out": True, "pushed": rescuer.pushed.qsize()}
            seconds = max(arrived for arrived, _ in pushed) - killed
            if sorted(e.event_key for _, e in pushed) != sorted(held["keys"]):
                raise RuntimeError("the second worker was pushed other events than the ones the killed worker held")
            await rescuer.complete([e for _, e in pushed], credit=0)
        return {"seconds": round(seconds, 4), "timed_out": False, "attempt": pushed[0][1].attempt}
    finally:
        if holder.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                holder.kill()
        await asyncio.wait_for(holder.wait(), 10.0)
