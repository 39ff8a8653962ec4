"""Helpers for the Work stream's tests: one open stream as a worker drives it, read with a deadline."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.integration.helpers import seconds

# The end of a stream as read() returns it (grpc.aio.EOF, missing from the stubs).
EOF: Any = getattr(grpc.aio, "EOF")  # noqa: B009
# A read that takes longer is a push that never came.
READ_WITHIN = 5.0

OK = grpc.StatusCode.OK.value[0]
ABORTED = grpc.StatusCode.ABORTED.value[0]
NOT_FOUND = grpc.StatusCode.NOT_FOUND.value[0]
INVALID = grpc.StatusCode.INVALID_ARGUMENT.value[0]
DENIED = grpc.StatusCode.PERMISSION_DENIED.value[0]
PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION.value[0]


def fence_of(event: inbox_pb2.ClaimedEvent) -> dict[str, Any]:
    return {"namespace": event.namespace, "event_key": event.event_key, "claim_token": event.claim_token}


class Worker:
    """One Work stream: what it was pushed, and each call's result by sequence."""

    def __init__(self, stub: InboxServiceStub, **metadata: Any) -> None:
        self.call: Any = stub.Work(**metadata)
        self.events: list[inbox_pb2.ClaimedEvent] = []
        self.results: dict[int, inbox_pb2.WorkResult] = {}
        # The server's `draining` notices (one, once it began to stop).
        self.draining: list[inbox_pb2.WorkDraining] = []
        self._sequence = 0

    async def subscribe(
        self, namespaces: list[str], *, credit: int = 0, lease: float | None = None, **fields: Any
    ) -> inbox_pb2.WorkSubscribed:
        subscription = inbox_pb2.WorkSubscription(namespaces=namespaces, **fields)
        if lease is not None:
            subscription.lease.CopyFrom(seconds(lease))
        await self.call.write(inbox_pb2.WorkRequest(subscribe=subscription, credit=credit))
        answer = await self.read()
        assert answer.WhichOneof("response") == "subscribed", answer
        subscribed: inbox_pb2.WorkSubscribed = answer.subscribed
        return subscribed

    async def read(self) -> inbox_pb2.WorkResponse:
        """The next message; pushed events and results are also kept."""
        answer = await asyncio.wait_for(self.call.read(), READ_WITHIN)
        assert answer is not EOF, "the stream ended"
        kind = answer.WhichOneof("response")
        if kind == "events":
            self.events.extend(answer.events.events)
        elif kind == "result":
            assert answer.result.sequence not in self.results, f"sequence {answer.result.sequence} answered twice"
            self.results[answer.result.sequence] = answer.result
        elif kind == "draining":
            self.draining.append(answer.draining)
        return answer  # type: ignore[no-any-return]

    async def credit(self, count: int) -> None:
        await self.call.write(inbox_pb2.WorkRequest(credit=count))

    async def pushed(self, count: int) -> list[inbox_pb2.ClaimedEvent]:
        """Reads until `count` more events were pushed than before; returns those."""
        before = len(self.events)
        while len(self.events) < before + count:
            await self.read()
        assert len(self.events) == before + count, f"pushed {len(self.events) - before}, wanted {count}"
        return self.events[before:]

    async def send(self, sequence: int | None = None, **call: Any) -> int:
        """Sends one call (complete=..., fail=...) with a sequence of its own unless given; returns it."""
        if sequence is None:
            self._sequence += 1
            sequence = self._sequence
        await self.call.write(inbox_pb2.WorkRequest(sequence=sequence, **call))
        return sequence

    async def result(self, sequence: int) -> inbox_pb2.WorkResult:
        """Reads until the call with this sequence is answered."""
        while sequence not in self.results:
            await self.read()
        return self.results.pop(sequence)

    async def ask(self, **call: Any) -> inbox_pb2.WorkResult:
        return await self.result(await self.send(**call))

    async def complete(self, event: inbox_pb2.ClaimedEvent) -> inbox_pb2.WorkResult:
        return await self.ask(complete=inbox_pb2.CompleteRequest(**fence_of(event)))

    async def close(self) -> grpc.StatusCode:
        """Half-closes; reads what is left; returns how the stream ended."""
        await self.call.done_writing()
        while (answer := await asyncio.wait_for(self.call.read(), READ_WITHIN)) is not EOF:
            if answer.WhichOneof("response") == "result":
                self.results[answer.result.sequence] = answer.result
        code: grpc.StatusCode = await self.call.code()
        return code
