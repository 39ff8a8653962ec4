"""py-spy profiles of the server under the loads the targets are about: Accept, AcceptBatch, Claim 10, the streams.

Recorded in windows of their own, after the measured ones: the sampler
costs CPU on the same cores, so no rate on the page comes from a profiled
window. What a profile gives is fractions: where the server's samples went.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from bench import support
from bench.node_load import NodeLoad, run_node
from bench.phases.accept import ACCEPT_NS
from bench.phases.claim import CLAIM_NS, prefill
from bench.profiles import profile_during
from bench.run import Run

log = logging.getLogger("bench")

ACCEPT = "accept"
ACCEPT_BATCH = "accept_batch"
CLAIM10 = "claim10"
ACCEPT_STREAM = "accept_stream"
WORK = "work"
# As the streams' measured phases drive them (bench/phases/streams.py, work.py).
STREAMS, IN_FLIGHT, WORK_CREDIT = 4, 64, 10


def _loads(run: Run) -> dict[str, tuple[str, NodeLoad]]:
    c = run.config
    top = max(c.concurrency)
    # The load outlasts the recording on both sides: py-spy attaches while it warms up.
    span = {"warmup_s": 0.5, "duration_s": c.profile_seconds + 1.5}
    complete_batch = support.lacks(run.support, support.COMPLETE_BATCH) is None
    claim = "claim_complete_batch" if complete_batch else "claim_complete"
    return {
        ACCEPT: (
            f"Accept, {top} callers",
            run.node("accept", top, namespace=ACCEPT_NS, prefix="profile-accept", **span),
        ),
        ACCEPT_BATCH: (
            f"AcceptBatch of {c.batch_rows}, {c.batch_clients} callers",
            run.node(
                "accept_batch", c.batch_clients, namespace=ACCEPT_NS, rows=c.batch_rows, prefix="profile-batch", **span
            ),
        ),
        CLAIM10: (
            f"Claim 10 -> {'CompleteBatch' if complete_batch else 'Complete each'}, {c.claim_workers} workers",
            run.node(claim, c.claim_workers, namespace=CLAIM_NS, max_events=10, **span),
        ),
        ACCEPT_STREAM: (
            f"AcceptStream, {IN_FLIGHT} items in flight on {STREAMS} streams",
            run.node(
                "accept_stream", IN_FLIGHT, namespace=ACCEPT_NS, channels=STREAMS, prefix="profile-stream", **span
            ),
        ),
        WORK: (
            f"Work, {c.claim_workers} streams, credit {WORK_CREDIT}, complete_batch on the stream",
            run.node("work", c.claim_workers, namespace=CLAIM_NS, credit=WORK_CREDIT, idle_ms=500, **span),
        ),
    }


async def profile_phase(run: Run, which: tuple[str, ...], folder: Path) -> None:
    """Profiles each of `which` (names above) into run.extra["profiles"]; raw stacks gzipped into `folder`."""
    assert run.server is not None
    c = run.config
    loads = _loads(run)
    profiles: dict[str, Any] = run.extra.setdefault("profiles", {})
    for name in which:
        label, load = loads[name]
        if name in (CLAIM10, WORK):
            await prefill(run.url, c.claim_prefill, "profile-claim")
        log.info("profiling the server under %s for %.0f s", label, c.profile_seconds)

        async def busy(load: NodeLoad = load) -> None:
            await run_node(load, None)

        try:
            summary = await profile_during(
                run.server.pid,
                busy,
                c.profile_seconds,
                c.profile_rate,
                folder / f"{name}.txt",
            )
        except RuntimeError as exc:
            # py-spy needs ptrace (root, or kernel.yama.ptrace_scope 0): the figures stand without it.
            log.warning("no profile of %s: %s", label, exc)
            profiles[name] = {"workload": label, "error": str(exc)}
            continue
        profiles[name] = {"workload": label, **summary}
