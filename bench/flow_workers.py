"""grpc.aio workers for issue 28's figures: Claim, CompleteBatch, and on an empty answer, a short pause and again.

The Node generator's callers stop at the first empty Claim (a drained queue
closes its window). Under a flow rule an empty answer means "not now" (no
slot, no token), not "drained", so these workers keep claiming until told to
stop. What they measure is read from the claims ledger afterwards; their own
clocks only decide when to stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

import grpc

from bench.grpc_load import Stub, accept_request
from bench.workload import Keys
from inboxd_client.v1 import inbox_pb2, inbox_pb2_grpc

# How long a worker whose Claim came back empty waits before the next: about a lease held for a
# round trip, so the rule, not the pause, decides how many are in flight, and shorter than the gap
# between two tokens at 50/s; 16 workers polling faster would mostly measure their own load.
EMPTY_PAUSE_S = 0.005


@contextlib.asynccontextmanager
async def separate_stubs(target: str, n: int) -> AsyncIterator[list[Stub]]:
    """`n` stubs, each on its own TCP connection, so SO_REUSEPORT spreads them over the server's processes."""
    # grpc shares one connection among channels with equal arguments unless each keeps its own pool.
    opened = [grpc.aio.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)]) for _ in range(n)]
    try:
        for chan in opened:
            await asyncio.wait_for(chan.channel_ready(), 30)
        yield [inbox_pb2_grpc.InboxServiceStub(chan) for chan in opened]  # type: ignore[no-untyped-call]
    finally:
        for chan in opened:
            await chan.close(None)


async def accept(stub: Stub, namespace: str, n: int, keys: Keys) -> None:
    """`n` events into `namespace` through AcceptBatch, 500 at a time, in order."""
    for start in range(0, n, 500):
        events = [accept_request(namespace, keys.next()) for _ in range(min(500, n - start))]
        await stub.AcceptBatch(inbox_pb2.AcceptBatchRequest(events=events))


@dataclass
class Tally:
    """What the workers did, shared: events completed, Claims that came back empty."""

    completed: int = 0
    empty: int = 0
    seen: dict[str, int] = field(default_factory=dict)


async def claim_and_complete(stub: Stub, request: inbox_pb2.ClaimRequest, tally: Tally) -> int:
    """One Claim and the CompleteBatch of what it handed out; how many events that was."""
    events = (await stub.Claim(request)).events
    if not events:
        tally.empty += 1
        return 0
    completions = [
        inbox_pb2.CompleteRequest(namespace=e.namespace, event_key=e.event_key, claim_token=e.claim_token)
        for e in events
    ]
    response = await stub.CompleteBatch(inbox_pb2.CompleteBatchRequest(completions=completions))
    refused = [r for r in response.results if r.code != 0]
    if refused:
        raise RuntimeError(f"CompleteBatch refused {len(refused)} items, first: {refused[0].message}")
    tally.completed += len(events)
    for e in events:
        tally.seen[e.namespace] = tally.seen.get(e.namespace, 0) + 1
    return len(events)


async def work_until(
    stubs: Sequence[Stub], namespaces: Sequence[str], batch: int, *, until_completed: int, seconds: float
) -> tuple[Tally, float]:
    """Every stub a worker claiming `namespaces` until `until_completed` events are done or `seconds` pass.

    Answers the tally and the seconds it took; `until_completed` 0 means only the clock stops them.
    """
    tally = Tally()
    began = time.perf_counter()
    deadline = began + seconds

    def done() -> bool:
        return (0 < until_completed <= tally.completed) or time.perf_counter() >= deadline

    async def worker(index: int, stub: Stub) -> None:
        request = inbox_pb2.ClaimRequest(namespaces=list(namespaces), max_events=batch, worker_id=f"bench-flow-{index}")
        while not done():
            if not await claim_and_complete(stub, request, tally):
                await asyncio.sleep(EMPTY_PAUSE_S)

    await asyncio.gather(*(worker(i, s) for i, s in enumerate(stubs)))
    return tally, time.perf_counter() - began


async def claim_until_seen(stub: Stub, batch: int, namespace: str, wanted: int, most: int) -> Tally:
    """One worker claiming every namespace until it has completed `wanted` of `namespace`'s events.

    It stops too when a Claim comes back empty (nothing is left) or after
    `most` events, so a server that never hands the quiet namespace out ends.
    """
    tally = Tally()
    request = inbox_pb2.ClaimRequest(max_events=batch, worker_id="bench-flow-fair")
    while tally.seen.get(namespace, 0) < wanted and tally.completed < most:
        if not await claim_and_complete(stub, request, tally):
            break
    return tally
