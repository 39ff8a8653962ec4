"""Work streams from this process (grpc.aio): the probes that say whether the server serves the streams, and a
worker that times what it is pushed (wake-up latency, recovery after a SIGKILLed worker).

Latency, not throughput, is measured here: the Node generator (streams.mjs)
drives every throughput figure of the streams.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf.duration_pb2 import Duration

from bench.grpc_load import Stub, stubs
from inboxd_client.v1 import inbox_pb2

PROBE_SECONDS = 10.0


def _verdict(exc: grpc.aio.AioRpcError, method: str) -> dict[str, Any]:
    if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
        return {"supported": False, "reason": f"the server answers {method} with UNIMPLEMENTED (not served)"}
    return {"supported": False, "reason": f"{method} ended {exc.code().name}: {exc.details()}"}


async def probe_accept_stream(target: str) -> dict[str, Any]:
    """Whether the server serves AcceptStream: a stream half-closed with no item ends OK."""
    if "AcceptStreamRequest" not in inbox_pb2.DESCRIPTOR.message_types_by_name:
        return {"supported": False, "reason": "these stubs have no AcceptStream"}
    async with stubs(target) as [stub]:
        call = stub.AcceptStream()
        await call.done_writing()
        code = await asyncio.wait_for(call.code(), PROBE_SECONDS)
    if code == grpc.StatusCode.OK:
        return {"supported": True, "reason": "an empty AcceptStream ended OK"}
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return {"supported": False, "reason": "the server answers AcceptStream with UNIMPLEMENTED (not served)"}
    return {"supported": False, "reason": f"an empty AcceptStream ended {code.name}"}


async def probe_work(target: str) -> dict[str, Any]:
    """Whether the server serves Work: a subscription is answered `subscribed`."""
    if "WorkRequest" not in inbox_pb2.DESCRIPTOR.message_types_by_name:
        return {"supported": False, "reason": "these stubs have no Work"}
    try:
        async with stubs(target) as [stub], work_stream(stub, ["bench/work-probe"], credit=0):
            return {"supported": True, "reason": "a Work subscription was answered `subscribed`"}
    except grpc.aio.AioRpcError as exc:
        return _verdict(exc, "Work")
    except TimeoutError:
        return {"supported": False, "reason": f"a Work subscription was not answered within {PROBE_SECONDS:.0f} s"}


@dataclass
class WorkStream:
    """One subscribed Work stream: what it was pushed, stamped on arrival, and calls answered by sequence."""

    call: Any
    pushed: asyncio.Queue[tuple[float, inbox_pb2.ClaimedEvent]] = field(default_factory=asyncio.Queue)
    answers: dict[int, asyncio.Future[inbox_pb2.WorkResult]] = field(default_factory=dict)
    sequence: int = 0

    async def read(self) -> None:
        # call.read(), not `async for`: grpc.aio refuses an iterator on a call that was read from.
        while (response := await self.call.read()) is not grpc.aio.EOF:  # type: ignore[attr-defined]
            kind = response.WhichOneof("response")
            if kind == "events":
                arrived = time.perf_counter()
                for event in response.events.events:
                    self.pushed.put_nowait((arrived, event))
            elif kind == "result":
                found = self.answers.pop(response.result.sequence, None)
                if found is not None and not found.done():
                    found.set_result(response.result)

    async def complete(self, events: Sequence[inbox_pb2.ClaimedEvent], credit: int) -> None:
        """Completes `events` in one complete_batch on the stream, giving `credit` back with it."""
        self.sequence += 1
        answer = asyncio.get_running_loop().create_future()
        self.answers[self.sequence] = answer
        completions = [
            inbox_pb2.CompleteRequest(namespace=e.namespace, event_key=e.event_key, claim_token=e.claim_token)
            for e in events
        ]
        await self.call.write(
            inbox_pb2.WorkRequest(
                sequence=self.sequence,
                credit=credit,
                complete_batch=inbox_pb2.CompleteBatchRequest(completions=completions),
            )
        )
        result = await answer
        if result.WhichOneof("result") == "error":
            raise RuntimeError(f"complete_batch on the stream refused: {result.error.code}: {result.error.message}")

    async def take(self, n: int) -> list[tuple[float, inbox_pb2.ClaimedEvent]]:
        """The next `n` pushed events with their arrival times (bound the wait with asyncio.timeout)."""
        return [await self.pushed.get() for _ in range(n)]


@contextlib.asynccontextmanager
async def work_stream(
    stub: Stub, namespaces: list[str], *, credit: int, lease_s: int = 30, worker_id: str = "bench-py"
) -> AsyncIterator[WorkStream]:
    """A Work stream subscribed to `namespaces` with `credit`, read in the background; cancelled on exit."""
    call = stub.Work()
    subscribe = inbox_pb2.WorkSubscription(namespaces=namespaces, lease=Duration(seconds=lease_s), worker_id=worker_id)
    try:
        # A server that ends the call at once (UNIMPLEMENTED) can fail this write with an error of grpc's own
        # ("Internal error from Core"); the read below raises the status the server ended the call with.
        with contextlib.suppress(grpc.aio.AioRpcError):
            await call.write(inbox_pb2.WorkRequest(credit=credit, subscribe=subscribe))
        first = await asyncio.wait_for(call.read(), PROBE_SECONDS)
        if first is grpc.aio.EOF or first.WhichOneof("response") != "subscribed":  # type: ignore[attr-defined]
            raise RuntimeError(f"a Work subscription was answered {first!r}, not `subscribed`")
        stream = WorkStream(call)
        reader = asyncio.ensure_future(stream.read())
        try:
            yield stream
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                await reader
    finally:
        call.cancel()


async def wakeup_latencies(
    stream: WorkStream, accepting: Stub, accept: Any, rounds: int, *, settle: float = 0.005
) -> list[float]:
    """Seconds from an Accept's answer to the push of its event on a waiting stream (credit 1, re-given each round).

    `accept()` makes the next AcceptRequest.
    """
    found: list[float] = []
    for _ in range(rounds):
        # The credit given back with the last completion is the server's before this Accept.
        await asyncio.sleep(settle)
        if not stream.pushed.empty():
            raise RuntimeError("the waiting stream was pushed an event before anything was accepted")
        await accepting.Accept(accept())
        accepted = time.perf_counter()
        async with asyncio.timeout(10.0):
            [(arrived, event)] = await stream.take(1)
        found.append(arrived - accepted)
        await stream.complete([event], credit=1)
    return found
