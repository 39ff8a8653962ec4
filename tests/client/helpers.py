"""Helpers for the client's tests: bounded waiting, a worker run in the background, stored rows."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from inboxd.store.database import Database
from inboxd_client import AsyncInboxClient, Worker
from tests.harness import eventually
from tests.integration.helpers import read_event

__all__ = ["eventually", "read_event", "running", "state_of"]


@contextlib.asynccontextmanager
async def running(worker: Worker) -> AsyncIterator[asyncio.Task[None]]:
    """Runs `worker` in the background; on exit stops it and waits for run() to return."""
    task = asyncio.create_task(worker.run(handle_signals=False))
    try:
        yield task
    finally:
        worker.stop()
        await asyncio.wait_for(task, 30)


async def state_of(db: Database, ns: str, key: str) -> str:
    row = await read_event(db, ns, key)
    return str(row["state"])


async def accept(client: AsyncInboxClient, ns: str, *keys: str, payload: Any = None) -> None:
    for key in keys:
        await client.accept(ns, key, "test.event", {"id": key} if payload is None else payload)
