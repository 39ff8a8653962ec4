"""Retention deletes a destination's attempts once their event is gone and they are older than the retention."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from inboxd.domain.destinations import DeliveryAttempt
from inboxd.store import destinations as store
from inboxd.store.database import Database
from inboxd.store.retention import apply_retention
from inboxd_client.v1 import inbox_pb2_grpc
from tests.integration.helpers import accept_request


def _attempt(ns: str, key: str, at: datetime) -> DeliveryAttempt:
    return DeliveryAttempt("d", ns, key, "msg_x", 1, 1, at, 500, timedelta(milliseconds=3), "HTTP 500", b"", "retry")


async def test_attempts_of_a_gone_event_go_with_retention_and_a_standing_events_stay(
    migrated_url: str, db: Database, inbox: inbox_pb2_grpc.InboxServiceStub, ns: str
) -> None:
    old = datetime.now(UTC) - timedelta(days=30)
    await inbox.Accept(accept_request(ns, "standing"))
    for key in ("standing", "gone", "gone"):
        await db.run(lambda conn, key=key: store.record_attempt(conn, _attempt(ns, key, old)))  # type: ignore[misc]
    await db.run(lambda conn: store.record_attempt(conn, _attempt(ns, "gone-recent", datetime.now(UTC))))

    await apply_retention(migrated_url, retention=timedelta(days=7), payload_retention=None, namespace=ns)

    async def keys(conn: Any) -> list[str]:
        cur = await conn.execute(
            "SELECT event_key FROM inbox_delivery_attempts WHERE namespace = %s ORDER BY event_key", (ns,)
        )
        return [r[0] for r in await cur.fetchall()]

    assert await db.run(keys) == ["gone-recent", "standing"]
