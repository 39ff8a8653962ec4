"""A worker process for the SIGTERM test: each handler says it started, then runs for payload["seconds"].

python sigterm_worker.py TARGET NAMESPACE GRACE_SECONDS stream|unary
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import asdict

from inboxd_client import AsyncInboxClient, EventContext, Worker


async def handle(ctx: EventContext) -> None:
    print(f"started {ctx.event_key}", flush=True)
    await asyncio.sleep(float(ctx.json()["seconds"]))


async def main(target: str, namespace: str, grace: float, path: str) -> None:
    async with AsyncInboxClient(target) as client:
        worker = Worker(
            client, handle, namespaces=[namespace], concurrency=3, wait=1.0, grace=grace, use_streams=path == "stream"
        )
        await worker.run()  # SIGTERM stops it
    print(f"stats {json.dumps(asdict(worker.stats))}", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]))
