"""inboxd's drain through Work (issue 27), beside the peers': WORKERS Node workers, one Work stream each.

Enqueued as the grpc.aio inboxd system enqueues; drained by the Node
generator (streams.mjs, workload `work`): each worker subscribes with credit
BATCH and completes what it is pushed in one complete_batch on its stream,
giving that credit back on the same message. The drain stops when the jobs
enqueued are done. Its time is the generator's window, from the moment its
workers open their streams (subscribing counts) to the last completion: the
Node process's own start, which the peers' in-process workers do not pay, is
left out.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.config import WORKERS
from bench.cpu import CpuProbe, CpuShare
from bench.node_load import NodeLoad, run_node
from bench.peers import DRAIN_CAP_SECONDS, Inboxd
from bench.phases.work import CREDIT

# The name of this system's rounds (the targets look it up; better_peer leaves out names starting "inboxd").
WORK_DRAIN = "inboxd-work"
DESCRIPTION = (
    f"{WORKERS} Node workers (streams.mjs), one Work stream each with credit {CREDIT}, completing each push "
    "in one complete_batch on the stream that gives the credit back"
)


@dataclass
class InboxdWork(Inboxd):
    target: str = ""
    name: str = WORK_DRAIN
    prefix: str = "peers-work"
    transport: str = "h2"
    # Samples the generator's window (the server's, PostgreSQL's and its own CPU in it).
    probe: CpuProbe | None = None
    # The generator's window of the last drain (see the module docstring), and the CPU in it; one_round takes both.
    drain_seconds: float | None = None
    drain_cpu: CpuShare | None = None
    _jobs: int = 0

    async def enqueue(self, jobs: int) -> None:
        self._jobs = jobs
        await super().enqueue(jobs)

    async def drain(self) -> int:
        load = NodeLoad(
            self.target,
            "work",
            WORKERS,
            0.0,
            DRAIN_CAP_SECONDS,
            namespace=self._namespace,
            credit=CREDIT,
            max_units=self._jobs,
            idle_ms=2000,
            transport=self.transport,
        )
        result = await run_node(load, self.probe)
        self.drain_seconds, self.drain_cpu = result.seconds, result.cpu
        return result.units
