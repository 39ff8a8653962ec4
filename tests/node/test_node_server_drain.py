"""The Node worker under a rolling restart: two `inboxd serve` on one database, the one its stream is on stopped.

clients/node/test/server-drain.test.js runs the worker (its channel knows both
servers) and sends SIGTERM to the first once every handler runs; it checks
each handler saw attempt 1 and the long ones were released. This test gives
it the servers and checks what the database kept.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from inboxd.serving.server import RunningServer
from inboxd.store.database import Connection, Database
from tests.integration.procs import Serve, embedded_env
from tests.node.runner import NODE_TESTS, run_node_tests, tap_count


async def attempts_by_key(db: Database, ns: str) -> dict[str, tuple[str, int]]:
    async def work(conn: Connection) -> dict[str, tuple[str, int]]:
        cur = await conn.execute("SELECT event_key, state, attempt FROM inbox_events WHERE namespace = %s", (ns,))
        return {str(key): (str(state), int(attempt)) for key, state, attempt in await cur.fetchall()}

    return await db.run(work)


async def test_a_rolling_restart_costs_the_node_worker_no_attempt(
    server: RunningServer, migrated_url: str, db: Database, ns: str, tmp_path: Path
) -> None:
    # Before: the long handlers' events were ended as a crash at the grace's end and came back at attempt 2.
    servers = [
        Serve(
            embedded_env(tmp_path / f"data-{name}", DATABASE_URL=migrated_url, INBOXD_SHUTDOWN_GRACE="3s"),
            tmp_path / f"serve-{name}.log",
        )
        for name in ("a", "b")
    ]
    try:
        # Started side by side: each waits for its readiness line.
        first, second = await asyncio.gather(*(asyncio.to_thread(s.start) for s in servers))
        assert first.proc is not None
        env = {
            "INBOXD_TARGET": f"ipv4:{first.target},{second.target}",
            "INBOXD_DRAINING_PID": str(first.proc.pid),
            "INBOXD_DRAIN_NAMESPACE": ns,
        }
        output = await run_node_tests(server, [NODE_TESTS / "server-drain.test.js"], env)
        assert tap_count(output, "pass") == 1
        assert first.proc.wait(30) == 0, first.log_tail()
    finally:
        for s in servers:
            s.kill()
    kept = await attempts_by_key(db, ns)
    assert sorted(kept) == sorted([f"quick-{i}" for i in range(3)] + [f"slow-{i}" for i in range(3)]), kept
    assert set(kept.values()) == {("completed", 1)}, kept
