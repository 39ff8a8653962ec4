"""SIGTERM to a worker process: it stops claiming, lets short handlers finish, releases the rest uncounted.

On both Worker paths: over the Work stream (the releases and the Complete go
over it, then it half-closes) and on unary Claims.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

from inboxd.serving.server import RunningServer
from inboxd.store.database import Database
from inboxd_client import AsyncInboxClient
from tests.client.helpers import read_event

SCRIPT = Path(__file__).with_name("sigterm_worker.py")


async def claims_of(db: Database, ns: str, key: str) -> int:
    async def count(conn: object) -> int:
        cur = await conn.execute(  # type: ignore[attr-defined]
            "SELECT count(*) FROM inbox_claims WHERE namespace = %s AND event_key = %s", (ns, key)
        )
        row = await cur.fetchone()
        return int(row[0])

    result: int = await db.run(count)
    return result


async def test_sigterm_releases_unfinished_events_without_counting_their_attempts(
    server: RunningServer, client: AsyncInboxClient, db: Database, ns: str, worker_path: str
) -> None:
    # "quick" finishes within the 3 s grace; the "slow" ones never would.
    await client.accept(ns, "quick", "t", {"seconds": 1})
    await client.accept(ns, "slow-1", "t", {"seconds": 120})
    await client.accept(ns, "slow-2", "t", {"seconds": 120})
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(SCRIPT), f"127.0.0.1:{server.port}", ns, "3", worker_path,
        stdout=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        started: set[str] = set()
        while len(started) < 3:
            line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
            assert line.startswith("started "), f"unexpected output: {line!r}"
            started.add(line.split()[1])
        proc.send_signal(signal.SIGTERM)
        # Accepted after the signal and before "quick" frees a slot: a worker
        # that kept claiming would take it as soon as "quick" finishes.
        await client.accept(ns, "late", "t", {"seconds": 0})
        output = (await asyncio.wait_for(proc.stdout.read(), 30)).decode()
        assert await asyncio.wait_for(proc.wait(), 30) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()

    stats = json.loads(output.split("stats ", 1)[1])
    assert (stats["completed"], stats["released"], stats["claimed"]) == (1, 2, 3)
    assert (await read_event(db, ns, "quick"))["state"] == "completed"
    for key in ("slow-1", "slow-2"):
        row = await read_event(db, ns, key)
        assert (row["state"], row["attempt"]) == ("pending", 0), key
    assert await claims_of(db, ns, "late") == 0
