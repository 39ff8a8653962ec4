"""A worker process that holds what a Work stream pushes it and never finishes: the test SIGKILLs it.

python -m tests.integration.work_stream_holder TARGET NAMESPACE COUNT
prints `held KEY` for each event pushed, then `holding` once it holds COUNT.
"""

from __future__ import annotations

import asyncio
import sys

import grpc

from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub


async def main(target: str, namespace: str, count: int) -> None:
    async with grpc.aio.insecure_channel(target) as channel:
        call = InboxServiceStub(channel).Work()
        subscription = inbox_pb2.WorkSubscription(namespaces=[namespace], worker_id="doomed")
        await call.write(inbox_pb2.WorkRequest(subscribe=subscription, credit=count))
        held = 0
        while held < count:
            answer = await call.read()
            for event in answer.events.events:
                print(f"held {event.event_key}", flush=True)
                held += 1
        print("holding", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
