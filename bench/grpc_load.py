"""grpc.aio clients in this process: wake-up latency, long-polls, and the peers' like-for-like Python side."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
from google.protobuf.duration_pb2 import Duration
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bench.loop import Step, percentile
from bench.workload import EVENT_TYPE, PAYLOAD_BYTES, Keys, cycle
from inboxd_client.v1 import inbox_pb2, inbox_pb2_grpc

Stub = inbox_pb2_grpc.InboxServiceStub


@contextlib.asynccontextmanager
async def stubs(target: str, channels: int = 1) -> AsyncIterator[list[Stub]]:
    """`channels` separate connections (HTTP/2 streams share one connection per channel)."""
    opened = [grpc.aio.insecure_channel(target) for _ in range(channels)]
    try:
        for chan in opened:
            await asyncio.wait_for(chan.channel_ready(), 30)
        yield [inbox_pb2_grpc.InboxServiceStub(chan) for chan in opened]  # type: ignore[no-untyped-call]
    finally:
        for chan in opened:
            await chan.close(None)


@contextlib.asynccontextmanager
async def channel(target: str) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(target) as opened:
        await asyncio.wait_for(opened.channel_ready(), 30)
        yield opened


def empty_rpc_steps(target_channel: grpc.aio.Channel, clients: int) -> list[Step]:
    """grpc.health.v1 Check: what one RPC costs the server with no inboxd work in it (auth interceptor included)."""
    stub = health_pb2_grpc.HealthStub(target_channel)
    request = health_pb2.HealthCheckRequest(service="")

    async def step() -> int:
        await stub.Check(request)
        return 1

    return [step] * clients


def accept_request(namespace: str, key: str) -> inbox_pb2.AcceptRequest:
    return inbox_pb2.AcceptRequest(namespace=namespace, event_key=key, event_type=EVENT_TYPE, payload=PAYLOAD_BYTES)


def accept_steps(stub: Stub, clients: int, namespace: str, keys: Keys) -> list[Step]:
    async def step() -> int:
        key = keys.next()
        await stub.Accept(accept_request(namespace, key))
        keys.keep(key)
        return 1

    return [step] * clients


def accept_batch_steps(stub: Stub, clients: int, namespace: str, keys: Keys, rows: int) -> list[Step]:
    async def step() -> int:
        request = inbox_pb2.AcceptBatchRequest(events=[accept_request(namespace, k) for k in keys.batch(rows)])
        await stub.AcceptBatch(request)
        return rows

    return [step] * clients


def duplicate_steps(stub: Stub, clients: int, namespace: str, keys: list[str]) -> list[Step]:
    repeat = cycle(keys)

    async def step() -> int:
        response = await stub.Accept(accept_request(namespace, next(repeat)))
        if response.outcome != inbox_pb2.ACCEPT_OUTCOME_DUPLICATE:
            raise RuntimeError(f"expected a duplicate, got outcome {response.outcome}")
        return 1

    return [step] * clients


def _carrying_step(stub: Stub, namespace: str, batch: int, worker_id: str) -> Step:
    carried: list[Any] = []

    async def step() -> int | None:
        request = inbox_pb2.ClaimRequest(
            namespaces=[namespace], max_events=batch, worker_id=worker_id, completions=carried
        )
        response = await stub.Claim(request)
        refused = [r for r in response.completion_results if r.code != 0]
        if refused or len(response.completion_results) != len(carried):
            raise RuntimeError(f"a Claim refused {len(refused)} carried completions, first: {refused[:1]}")
        carried[:] = [
            inbox_pb2.CompleteRequest(namespace=e.namespace, event_key=e.event_key, claim_token=e.claim_token)
            for e in response.events
        ]
        return len(response.events) or None

    return step


async def claim_carries_completions(stub: Stub, namespace: str) -> bool:
    """Whether the server answers a Claim's carried completions (ClaimRequest.completions), asked once."""
    if "completions" not in inbox_pb2.ClaimRequest.DESCRIPTOR.fields_by_name:
        return False
    probe = inbox_pb2.CompleteRequest(namespace=namespace, event_key="probe", claim_token="probe")
    response = await stub.Claim(inbox_pb2.ClaimRequest(namespaces=[namespace], completions=[probe]))
    return len(response.completion_results) == 1


def complete_batch_call(channel: grpc.aio.Channel) -> Any | None:
    """InboxService.CompleteBatch on `channel`, when the Python stubs know its messages; None otherwise."""
    request_type = getattr(inbox_pb2, "CompleteBatchRequest", None)
    response_type = getattr(inbox_pb2, "CompleteBatchResponse", None)
    if request_type is None or response_type is None:
        return None
    return channel.unary_unary(
        "/inboxd.v1.InboxService/CompleteBatch",
        request_serializer=request_type.SerializeToString,
        response_deserializer=response_type.FromString,
    )


def claim_complete_steps(
    stub: Stub, workers: int, namespace: str, batch: int, complete_batch: Any | None = None, *, carry: bool = False
) -> list[Step]:
    """A no-op worker: Claim up to `batch`, then one CompleteBatch, or Complete each concurrently.

    With `carry`, each Claim carries the previous batch's completions instead
    (ClaimRequest.completions): one call per cycle; the last, empty-handed
    Claim carries the last batch.
    """
    if carry:
        return [_carrying_step(stub, namespace, batch, f"bench-{i}") for i in range(workers)]

    def step_for(index: int) -> Step:
        request = inbox_pb2.ClaimRequest(namespaces=[namespace], max_events=batch, worker_id=f"bench-{index}")

        async def step() -> int | None:
            claimed = (await stub.Claim(request)).events
            if not claimed:
                return None
            if complete_batch is not None:
                completions = [
                    inbox_pb2.CompleteRequest(namespace=e.namespace, event_key=e.event_key, claim_token=e.claim_token)
                    for e in claimed
                ]
                response = await complete_batch(inbox_pb2.CompleteBatchRequest(completions=completions))
                refused = [r for r in response.results if r.code != 0]
                if refused:
                    raise RuntimeError(f"CompleteBatch refused {len(refused)} items, first: {refused[0].message}")
                return len(claimed)
            await asyncio.gather(
                *(
                    stub.Complete(
                        inbox_pb2.CompleteRequest(
                            namespace=e.namespace, event_key=e.event_key, claim_token=e.claim_token
                        )
                    )
                    for e in claimed
                )
            )
            return len(claimed)

        return step

    return [step_for(i) for i in range(workers)]


async def wakeup_latencies(
    waiting: Stub, accepting: Stub, namespace: str, keys: Keys, rounds: int, *, settle: float = 0.02
) -> list[float]:
    """Seconds from the Accept's answer to the answer of a Claim that was waiting for it."""
    found: list[float] = []
    claim = inbox_pb2.ClaimRequest(
        namespaces=[namespace], max_events=1, wait=Duration(seconds=10), worker_id="bench-wake"
    )
    for _ in range(rounds):
        waiter = asyncio.ensure_future(waiting.Claim(claim))
        # Long enough for the Claim to find nothing and start waiting.
        await asyncio.sleep(settle)
        if waiter.done():
            raise RuntimeError("a waiting Claim answered before anything was accepted")
        await accepting.Accept(accept_request(namespace, keys.next()))
        accepted = time.perf_counter()
        events = (await waiter).events
        woken = time.perf_counter()
        if len(events) != 1:
            raise RuntimeError(f"the waiting Claim answered {len(events)} events, not 1")
        found.append(woken - accepted)
        e = events[0]
        await waiting.Complete(
            inbox_pb2.CompleteRequest(namespace=e.namespace, event_key=e.event_key, claim_token=e.claim_token)
        )
    return found


def summarize_ms(latencies: list[float]) -> dict[str, float]:
    return {
        "p50_ms": 1000 * percentile(latencies, 0.50),
        "p90_ms": 1000 * percentile(latencies, 0.90),
        "p99_ms": 1000 * percentile(latencies, 0.99),
        "max_ms": 1000 * max(latencies, default=0.0),
    }
