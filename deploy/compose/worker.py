"""The compose stack's sample worker: completes every `demo.ping` in namespace `demo`, and says so.

A worker of your own replaces it: any program on inboxd-client (pip install inboxd-client from the release, see
docs/deployment.md) with INBOXD_TARGET, INBOXD_TOKEN (a token with the work scope) and INBOXD_TRUSTED_NETWORK=1
inside the stack's network.
"""

from __future__ import annotations

import asyncio
import logging
import os

from inboxd_client import AsyncInboxClient, SyncEventContext, Worker

log = logging.getLogger("sample-worker")


def handle(ctx: SyncEventContext) -> None:
    # The work goes here; returning completes the event, raising retries it later.
    log.info("handling %s %s/%s: %s", ctx.event_type, ctx.namespace, ctx.event_key, ctx.json())


async def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    target = os.environ.get("INBOXD_TARGET", "inboxd:50051")
    async with AsyncInboxClient(target, token=os.environ.get("INBOXD_TOKEN")) as client:
        worker = Worker(client, handle, namespaces=[os.environ.get("INBOXD_NAMESPACE", "demo")], concurrency=4)
        log.info("working on %s", target)
        await worker.run()


if __name__ == "__main__":
    asyncio.run(main())
