"""Helpers for the bulk operation tests: dead letters made in bulk, an operation started, its audit rows counted."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from inboxd.serving.server import RunningServer
from inboxd.store.database import Database
from inboxd_client.v1 import admin_pb2, inbox_pb2, types_pb2
from inboxd_client.v1.admin_pb2_grpc import InboxAdminServiceStub
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.integration.helpers import accept_request

REPLAY = admin_pb2.BULK_ACTION_REPLAY
IGNORE = admin_pb2.BULK_ACTION_IGNORE
RUNNING = admin_pb2.BULK_OPERATION_STATE_RUNNING
DONE = admin_pb2.BULK_OPERATION_STATE_DONE
CANCELLED = admin_pb2.BULK_OPERATION_STATE_CANCELLED
FAILED = admin_pb2.BULK_OPERATION_STATE_FAILED
PENDING = types_pb2.EVENT_STATE_PENDING
COMPLETED = types_pb2.EVENT_STATE_COMPLETED
DEAD = types_pb2.EVENT_STATE_DEAD_LETTERED


def key(i: int) -> str:
    return f"k{i:05d}"


async def dead_letters(inbox: InboxServiceStub, ns: str, count: int, error: str = "SMTP timeout") -> list[str]:
    """`count` events of `ns` dead-lettered with `error`, accepted in key order; answers their keys."""
    keys = [key(i) for i in range(count)]
    for start in range(0, count, 500):
        batch = [accept_request(ns, k) for k in keys[start : start + 500]]
        await inbox.AcceptBatch(inbox_pb2.AcceptBatchRequest(events=batch))
    left = count
    while left:
        answer = await inbox.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], max_events=min(left, 100)))
        assert answer.events, f"{left} events of {ns} not claimable"
        await asyncio.gather(
            *(
                inbox.Fail(
                    inbox_pb2.FailRequest(
                        namespace=e.namespace,
                        event_key=e.event_key,
                        claim_token=e.claim_token,
                        error=error,
                        permanent=True,
                    )
                )
                for e in answer.events
            )
        )
        left -= len(answer.events)
    return keys


def request(ns: str, action: Any = REPLAY, **fields: Any) -> admin_pb2.StartBulkOperationRequest:
    """A StartBulkOperation over namespace `ns`; `filter_` fields go into the filter."""
    filter_fields = fields.pop("filter_", {})
    fields.setdefault("reason", "after the SMTP outage")
    return admin_pb2.StartBulkOperationRequest(
        filter=admin_pb2.BulkFilter(namespace_pattern=ns, **filter_fields), action=action, **fields
    )


async def start(
    admin: InboxAdminServiceStub, ns: str, action: Any = REPLAY, **fields: Any
) -> admin_pb2.StartBulkOperationResponse:
    answer: admin_pb2.StartBulkOperationResponse = await admin.StartBulkOperation(request(ns, action, **fields))
    return answer


async def get(admin: InboxAdminServiceStub, op_id: str) -> admin_pb2.BulkOperation:
    operation: admin_pb2.BulkOperation = (
        await admin.GetBulkOperation(admin_pb2.GetBulkOperationRequest(id=op_id))
    ).operation
    return operation


async def carry(server: RunningServer, op_id: str, **runner: Any) -> None:
    """Carries the operation on to its end with a runner of the server's own (the test servers run none)."""
    from inboxd.background.bulk_runner import BulkRunner

    assert server.ops is not None
    await BulkRunner(server.ops.operators, poll_seconds=0, **runner).carry(uuid.UUID(op_id))


async def audit_rows(db: Database, op_id: str) -> list[tuple[str, str]]:
    """(namespace, event_key) of every audit row naming the operation, replays' and discards' alike."""

    async def read(conn: Any) -> list[tuple[str, str]]:
        cur = await conn.execute(
            "SELECT namespace, event_key FROM inbox_replays WHERE bulk_operation = %(op)s"
            " UNION ALL SELECT namespace, event_key FROM inbox_operator_actions WHERE bulk_operation = %(op)s",
            {"op": op_id},
        )
        return [(str(ns), str(k)) for ns, k in await cur.fetchall()]

    rows: list[tuple[str, str]] = await db.run(read)
    return rows


async def states(db: Database, ns: str) -> dict[str, str]:
    """event_key -> state of every event of `ns`."""

    async def read(conn: Any) -> dict[str, str]:
        cur = await conn.execute("SELECT event_key, state FROM inbox_events WHERE namespace = %s", (ns,))
        return {str(k): str(s) for k, s in await cur.fetchall()}

    found: dict[str, str] = await db.run(read)
    return found
