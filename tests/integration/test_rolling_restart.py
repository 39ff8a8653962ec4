"""A rolling restart under held Work streams loses no attempt: two `inboxd serve` on one database, one stopped.

The Python worker's channel knows both servers. SIGTERM to the one its
stream is on: the server says it is draining, the short handlers finish and
complete over the draining stream, the long ones are released before the
grace ends (their attempts not counted), and the worker's stream opens
again on the other server, which hands the released events back at
attempt 1.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from inboxd.store.database import Connection, Database
from inboxd_client import AsyncInboxClient, EventContext, Worker
from tests.integration.procs import Serve, embedded_env, poll

GRACE = 3.0


async def states(db: Database, ns: str) -> dict[str, tuple[str, int]]:
    async def work(conn: Connection) -> dict[str, tuple[str, int]]:
        cur = await conn.execute("SELECT event_key, state, attempt FROM inbox_events WHERE namespace = %s", (ns,))
        return {str(key): (str(state), int(attempt)) for key, state, attempt in await cur.fetchall()}

    return await db.run(work)


async def test_a_rolling_restart_under_held_work_streams_loses_no_attempt(
    migrated_url: str, db: Database, ns: str, tmp_path: Path
) -> None:
    # Before: the long handlers' events were ended as a crash at the grace's end and came back at attempt 2.
    servers = [
        Serve(
            embedded_env(tmp_path / f"data-{name}", DATABASE_URL=migrated_url, INBOXD_SHUTDOWN_GRACE=f"{GRACE}s"),
            tmp_path / f"serve-{name}.log",
        )
        for name in ("a", "b")
    ]
    try:
        # Started side by side: each waits for its readiness line.
        first, second = await asyncio.gather(*(asyncio.to_thread(server.start) for server in servers))
        calls: list[tuple[str, int]] = []
        slow_seen: set[str] = set()
        signalled = asyncio.Event()

        async def handler(ctx: EventContext) -> None:
            calls.append((ctx.event_key, ctx.attempt))
            if ctx.event_key.startswith("slow") and ctx.event_key not in slow_seen:
                slow_seen.add(ctx.event_key)
                await asyncio.sleep(120)  # outlives the grace: released, then handled again
            elif ctx.event_key.startswith("quick"):
                await signalled.wait()
                await asyncio.sleep(0.2)  # finishes within the grace, over the draining stream

        # pick_first: the first server while it serves, the second once it stops.
        async with AsyncInboxClient(f"ipv4:{first.target},{second.target}") as client:
            keys = [f"quick-{i}" for i in range(3)] + [f"slow-{i}" for i in range(3)]
            for key in keys:
                await client.accept(ns, key, "t", {})
            worker = Worker(client, handler, namespaces=[ns], concurrency=10, grace=5.0)
            running = asyncio.ensure_future(worker.run(handle_signals=False))

            async def all_started() -> bool | None:
                return True if len(calls) >= len(keys) else None

            await poll(all_started, within=30)
            assert first.proc is not None
            first.proc.send_signal(signal.SIGTERM)
            signalled.set()
            assert await asyncio.to_thread(first.proc.wait, 30) == 0, first.log_tail()

            async def all_completed() -> dict[str, tuple[str, int]] | None:
                now = await states(db, ns)
                return now if all(state == "completed" for state, _ in now.values()) else None

            final = await poll(all_completed, within=30)
            worker.stop()
            await asyncio.wait_for(running, 30)
        assert sorted(calls) == sorted([(key, 1) for key in keys] + [(f"slow-{i}", 1) for i in range(3)]), calls
        assert {key: attempt for key, (_, attempt) in final.items()} == dict.fromkeys(keys, 1)
        assert (worker.stats.completed, worker.stats.released) == (6, 3), worker.stats
    finally:
        for server in servers:
            server.kill()
