"""A Python worker process for the end-to-end trace: one namespace, one action per event, stops after `count`.

    python -m tests.tracing_e2e.py_worker TARGET NAMESPACE COUNT

Tracing is the runtime's, turned on by the OTEL_* variables the test sets; nothing here knows of it.
"""

from __future__ import annotations

import asyncio
import sys

from inboxd_client import AsyncInboxClient, EventContext, Worker


async def main(target: str, namespace: str, count: int) -> None:
    handled = 0
    done = asyncio.Event()

    async def send_receipt(key: str) -> str:
        return f"receipt-{key[:8]}"

    async def handle(ctx: EventContext) -> None:
        nonlocal handled
        await ctx.run_action("send-receipt:v1", send_receipt)
        handled += 1
        if handled >= count:
            done.set()

    async with AsyncInboxClient(target) as client:
        worker = Worker(client, handle, namespaces=[namespace])
        running = asyncio.create_task(worker.run(handle_signals=False))
        waiting = asyncio.create_task(done.wait())
        await asyncio.wait({running, waiting}, return_when=asyncio.FIRST_COMPLETED)
        worker.stop()
        await running
        waiting.cancel()
    print(f"handled {handled}", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
