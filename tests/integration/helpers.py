"""Small helpers shared by the integration tests."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from inboxd.observability.logs import JsonFormatter
from inboxd.store.migrate import migrate
from inboxd_client.v1 import inbox_pb2


def accept_request(ns: str, key: str, payload: Any = None, **fields: Any) -> inbox_pb2.AcceptRequest:
    body = payload if isinstance(payload, bytes) else json.dumps({"id": key} if payload is None else payload).encode()
    fields.setdefault("event_type", "test.event")
    return inbox_pb2.AcceptRequest(namespace=ns, event_key=key, payload=body, **fields)


async def expect_status(call: Any, code: grpc.StatusCode) -> grpc.aio.AioRpcError:
    """Awaits `call` and returns its error, failing the test unless the status is `code`."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    assert caught.value.code() == code, f"{caught.value.code()}: {caught.value.details()}"
    return caught.value


async def read_event(db: Any, ns: str, key: str) -> dict[str, Any]:
    """The stored row of one event, as a dict (through the real database)."""

    async def work(conn: Any) -> dict[str, Any]:
        cur = await conn.execute(
            "SELECT state, attempt, claim_token, fencing_token, last_error, disposition, disposition_reason,"
            " available_at, lease_expires_at FROM inbox_events WHERE namespace = %s AND event_key = %s",
            (ns, key),
        )
        row = await cur.fetchone()
        assert row is not None, f"no event {key!r} in {ns!r}"
        names = [c.name for c in cur.description]
        return dict(zip(names, row, strict=True))

    result: dict[str, Any] = await db.run(work)
    return result


def seconds(value: float) -> Any:
    from google.protobuf.duration_pb2 import Duration

    d = Duration()
    d.FromNanoseconds(int(value * 1e9))
    return d


@contextlib.contextmanager
def captured_logs(level: int) -> Iterator[io.StringIO]:
    """Every log record from `level` up, formatted as inboxd formats it in production."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    before = root.level
    root.addHandler(handler)
    root.setLevel(level)
    try:
        yield out
    finally:
        root.removeHandler(handler)
        root.setLevel(before)


@contextlib.asynccontextmanager
async def own_database(cluster_url: str, *, migrated: bool = True, prefix: str = "inboxd_own") -> AsyncIterator[str]:
    """A new database on the cluster of `cluster_url`, migrated from nothing unless told not, dropped afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    async with await psycopg.AsyncConnection.connect(cluster_url, autocommit=True) as admin:
        await admin.execute(f'CREATE DATABASE "{name}"')
        try:
            url = make_conninfo(cluster_url, dbname=name)
            if migrated:
                await migrate(url)
            yield url
        finally:
            await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


class TableLocked:
    """Holds inbox_events in EXCLUSIVE mode from the test's own connection: every Accept waits for it."""

    def __init__(self, db: Any) -> None:
        self._db = db  # an inboxd.store.database.Database
        self._locked = asyncio.Event()
        self._unlock = asyncio.Event()
        self._holder: asyncio.Task[None] | None = None

    async def _hold(self, conn: Any) -> None:
        await conn.execute("LOCK TABLE inbox_events IN EXCLUSIVE MODE")
        self._locked.set()
        await self._unlock.wait()

    async def __aenter__(self) -> None:
        self._holder = asyncio.create_task(self._db.run(self._hold))
        await self._locked.wait()

    async def __aexit__(self, *exc: object) -> None:
        self._unlock.set()
        assert self._holder is not None
        await self._holder


def stream_items_held(server: Any) -> float:
    """The AcceptStream items a server (a RunningServer) has read and not yet answered, by its own gauge."""
    assert server.ops is not None
    value = server.ops.metrics.registry.get_sample_value("inboxd_accept_stream_items_held")
    return value or 0.0
