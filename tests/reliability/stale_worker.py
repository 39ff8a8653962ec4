"""A worker process that goes stale, for the stale-worker scenario: `python -m tests.reliability.stale_worker`.

Arguments: TARGET DATABASE_URL NAMESPACE LEASE_SECONDS.

It claims one event (no renewals) and prints `claimed {json}`. The scenario
then freezes it (SIGSTOP), lets another worker take the event over, thaws it
(SIGCONT) and writes `resume` to its stdin. It then tries everything a worker
that does not know it lost its claim would try, and prints `results {json}`:
each write's answer (a status code name, a row count or an SQLSTATE).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable
from typing import Any

import psycopg

from inboxd_client import AsyncInboxClient, InboxError
from inboxd_client.v1 import inbox_pb2, types_pb2

# The business write, fenced: only a claim newer than the row's last writer may change it.
FENCED_WRITE = """
UPDATE reliability_accounts SET balance = balance + 1, fence = %(token)s
WHERE id = %(id)s AND fence < %(token)s
"""
# An unfenced business write, made safe by completing the event in the same transaction.
UNFENCED_WRITE = "UPDATE reliability_accounts SET balance = balance + 1000 WHERE id = %(id)s"


def account_id(namespace: str, event_key: str) -> str:
    return f"{namespace}/{event_key}"


async def code_of(call: Awaitable[Any]) -> str:
    try:
        await call
    except InboxError as exc:
        return exc.code.name
    return "OK"


async def stale_writes(client: AsyncInboxClient, database_url: str, event: inbox_pb2.ClaimedEvent) -> dict[str, Any]:
    ident = {"id": account_id(event.namespace, event.event_key), "token": event.fencing_token}
    results: dict[str, Any] = {}
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cur = await conn.execute(FENCED_WRITE, ident)
        results["fenced_write_rows"] = cur.rowcount
        try:
            async with conn.transaction():
                await conn.execute(UNFENCED_WRITE, ident)
                await conn.execute(
                    "SELECT inboxd_complete(%s, %s, %s)", (event.namespace, event.event_key, event.claim_token)
                )
            results["complete_in_transaction"] = "OK"
        except psycopg.Error as exc:
            results["complete_in_transaction"] = exc.sqlstate
    results["RenewLease"] = await code_of(client.renew_lease(event, lease=30.0))
    results["INTENDED"] = await code_of(
        client.record_action_outcome(event, "notify:v1", types_pb2.ACTION_STATE_INTENDED)
    )
    results["Complete"] = await code_of(client.complete(event))
    results["Fail"] = await code_of(client.fail(event, "stale worker gives up"))
    results["Release"] = await code_of(client.release(event))
    # An outcome is a fact about the outside world: accepted from any claim ever issued (DESIGN.md).
    results["outcome_SUCCEEDED"] = await code_of(
        client.record_action_outcome(event, "stale-report:v1", types_pb2.ACTION_STATE_SUCCEEDED, external_ref="late")
    )
    return results


async def main(target: str, database_url: str, namespace: str, lease: float) -> None:
    async with AsyncInboxClient(target, retry=None) as client:
        answer = await client.claim(namespaces=[namespace], max_events=1, lease=lease, wait=10.0, worker_id="stale")
        [event] = answer.events
        claim = {"key": event.event_key, "claim_token": event.claim_token, "fencing_token": event.fencing_token}
        print(f"claimed {json.dumps(claim)}", flush=True)
        line = await asyncio.to_thread(sys.stdin.readline)
        assert line.strip() == "resume", line
        print(f"results {json.dumps(await stale_writes(client, database_url, event))}", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])))
