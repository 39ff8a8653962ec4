"""The Node client and worker (clients/node) against a live inboxd, fed through the Python edge.

This test accepts webhooks through the edge, then runs `node --test clients/node/test/`
with INBOXD_TARGET pointing at the session's inboxd. The Node tests check claim,
renewal, fencing (ABORTED), actions and SIGTERM themselves; this test checks that
they all ran and passed, and that the edge's events ended COMPLETED with their
action recorded.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from inboxd.serving.server import RunningServer
from inboxd.store.database import Connection, Database
from inboxd_edge.config import config_from_data
from inboxd_edge.serve import RunningEdge, start_edge
from tests.edge.rig import as_body, post, routes_config, sign_standard, std_account
from tests.harness import REPO

NODE_PACKAGE = REPO / "clients" / "node"
NODE_TIMEOUT_SECONDS = 120.0


@pytest.fixture
async def edge(server: RunningServer) -> AsyncIterator[RunningEdge]:
    running = await start_edge(config_from_data(routes_config(f"127.0.0.1:{server.port}"), {}), listen="127.0.0.1:0")
    yield running
    await running.stop()


def node_or_fail() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH: the Node worker tests need Node 20+")
    if not (NODE_PACKAGE / "node_modules" / "@grpc" / "grpc-js").is_dir():
        pytest.fail("clients/node has no node_modules: run `npm ci --prefix clients/node` (make setup)")
    return node


async def event_states(db: Database, namespace: str) -> dict[str, tuple[str, list[Any]]]:
    """Each event's state and its (action, state, idempotency key) rows."""

    async def work(conn: Connection) -> dict[str, tuple[str, list[Any]]]:
        cur = await conn.execute(
            "SELECT e.event_key, e.state, a.action, a.state, a.idempotency_key FROM inbox_events e"
            " LEFT JOIN inbox_actions a USING (namespace, event_key) WHERE e.namespace = %s",
            (namespace,),
        )
        found: dict[str, tuple[str, list[Any]]] = {}
        for key, state, action, action_state, idem in await cur.fetchall():
            found.setdefault(str(key), (str(state), []))[1].append((action, action_state, idem))
        return found

    return await db.run(work)


def tap_count(output: str, name: str) -> int:
    match = re.search(rf"^# {name} (\d+)$", output, re.MULTILINE)
    assert match, f"no '# {name}' line in node's output:\n{output[-4000:]}"
    return int(match.group(1))


async def test_node_worker_completes_edge_events_renews_leases_and_is_fenced(
    server: RunningServer, edge: RunningEdge, db: Database
) -> None:
    node = node_or_fail()
    acct = std_account()
    keys = [f"msg_{i}" for i in range(3)]
    async with aiohttp.ClientSession() as http:
        for key in keys:
            body = as_body({"type": "invoice.paid", "data": {"id": key}})
            reply = await post(http, f"{edge.url}/hooks/std/{acct}", body, sign_standard(body, key, account=acct))
            assert (reply.status, reply.outcome) == (200, "accepted")

    env = {
        **os.environ,
        "INBOXD_TARGET": f"127.0.0.1:{server.port}",
        "INBOXD_EDGE_NAMESPACE": f"std/{acct}",
        "INBOXD_EDGE_KEYS": json.dumps(keys),
    }
    # Run as a child of this event loop, which keeps serving the in-process inboxd meanwhile.
    proc = await asyncio.create_subprocess_exec(
        node,
        "--test",
        "--test-reporter=tap",
        str(NODE_PACKAGE / "test"),
        cwd=NODE_PACKAGE,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        raw, _ = await asyncio.wait_for(proc.communicate(), NODE_TIMEOUT_SECONDS)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    output = raw.decode(errors="replace")
    assert proc.returncode == 0, f"node --test failed:\n{output[-8000:]}"
    assert tap_count(output, "fail") == 0
    assert tap_count(output, "skipped") == 0, "a Node test was skipped: its environment is missing"
    assert tap_count(output, "pass") >= 11

    states = await event_states(db, f"std/{acct}")
    assert set(states) == set(keys)
    for key, (state, actions) in states.items():
        assert state == "completed", key
        [(action, action_state, idempotency_key)] = actions
        assert (action, action_state) == ("notify:v1", "succeeded"), key
        assert idempotency_key
