"""A worker process for the worker-crash scenario, run as `python -m tests.reliability.crash_worker`.

Arguments: TARGET DATABASE_URL NAMESPACE LEASE_SECONDS CONCURRENCY.

The Python `Worker` claims from NAMESPACE. Each handler prints
`started KEY FENCING_TOKEN`, works for payload["work"] seconds, then writes its
business effect and completes the event in ONE transaction of its own
(`inboxd_complete()`), and prints `done KEY FENCING_TOKEN`. Killed anywhere in
between, it leaves either both the effect and the completion, or neither.
"""

from __future__ import annotations

import asyncio
import os
import sys

import psycopg

from inboxd_client import AsyncInboxClient, EventContext, Worker

EFFECTS_TABLE = """
CREATE TABLE IF NOT EXISTS reliability_effects (
    namespace     text   NOT NULL,
    event_key     text   NOT NULL,
    fencing_token bigint NOT NULL,
    worker        text   NOT NULL,
    PRIMARY KEY (namespace, event_key, fencing_token)
)
"""


async def main(target: str, database_url: str, namespace: str, lease: float, concurrency: int) -> None:
    me = f"crash-worker-{os.getpid()}"

    async def handle(ctx: EventContext) -> None:
        print(f"started {ctx.event_key} {ctx.fencing_token}", flush=True)
        await asyncio.sleep(float(ctx.json()["work"]))  # the work a kill interrupts
        async with await psycopg.AsyncConnection.connect(database_url) as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO reliability_effects (namespace, event_key, fencing_token, worker) VALUES (%s, %s, %s, %s)",
                (ctx.namespace, ctx.event_key, ctx.fencing_token, me),
            )
            # Raises (SQLSTATE IX409) if the claim was superseded: the effect then rolls back with it.
            await conn.execute("SELECT inboxd_complete(%s, %s, %s)", (ctx.namespace, ctx.event_key, ctx.claim_token))
        print(f"done {ctx.event_key} {ctx.fencing_token}", flush=True)

    async with AsyncInboxClient(target) as client:
        worker = Worker(
            client, handle, namespaces=[namespace], concurrency=concurrency, lease=lease, wait=1.0, worker_id=me
        )
        await worker.run()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])))
