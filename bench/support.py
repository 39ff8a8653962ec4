"""What the server under test can do, found out at run time: a figure it cannot serve is reported as not measured."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from bench import grpc_load
from bench.node_load import probe_complete_batch
from bench.work_streams import probe_accept_stream, probe_work

COMPLETE_BATCH = "complete_batch"
CLAIM_CARRIES = "claim_carries_completions"
WORKERS = "workers"
ACCEPT_STREAM = "accept_stream"
WORK = "work"


def workers_flag() -> dict[str, Any]:
    """Whether `inboxd serve --help` offers `--workers` (several server processes on one port)."""
    try:
        shown = subprocess.run(
            [sys.executable, "-m", "inboxd", "serve", "--help"], check=False, capture_output=True, text=True, timeout=60
        ).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"supported": False, "reason": f"`inboxd serve --help` failed: {exc}"}
    if "--workers" in shown:
        return {"supported": True, "reason": "`inboxd serve --help` offers --workers"}
    return {"supported": False, "reason": "`inboxd serve --help` has no --workers"}


async def claim_carries(target: str) -> dict[str, Any]:
    """Whether a Claim commits the completions it carries (ClaimRequest.completions) and answers each."""
    async with grpc_load.stubs(target) as (stub,):
        if await grpc_load.claim_carries_completions(stub, "bench/carry-probe"):
            return {"supported": True, "reason": "a Claim answered the one completion it carried"}
    return {"supported": False, "reason": "a Claim carrying a completion answered no completion_results"}


async def detect(target: str) -> dict[str, dict[str, Any]]:
    return {
        COMPLETE_BATCH: await probe_complete_batch(target),
        CLAIM_CARRIES: await claim_carries(target),
        WORKERS: workers_flag(),
        ACCEPT_STREAM: await probe_accept_stream(target),
        WORK: await probe_work(target),
    }


def lacks(support: dict[str, dict[str, Any]], feature: str) -> str | None:
    """None when the server has `feature`; otherwise why not, for the page."""
    found = support.get(feature)
    if found is None:
        return f"not detected ({feature})"
    return None if found["supported"] else str(found["reason"])
