"""The Node client and worker (clients/node) against a live inboxd, fed through the Python edge.

This test accepts webhooks through the edge, then runs `node --test clients/node/test/`
with INBOXD_TARGET pointing at the session's inboxd. The Node tests check claim,
renewal, fencing (ABORTED), actions and SIGTERM themselves; this test checks that
they all ran and passed, and that the edge's events ended COMPLETED with their
action recorded. It runs twice: every file with the workers on the Work stream
(INBOXD_WORKER_TRANSPORT=work), then the files whose tests hold for either path
(WORKER_FILES) with the workers on unary Claims; the files of one path's own
behaviour (Claims carrying completions, the idle Claims' backoff, a Claim's answer
too big) take that path themselves.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from inboxd.serving.server import RunningServer
from inboxd.store.database import Connection, Database
from inboxd_edge.config import config_from_data
from inboxd_edge.serve import RunningEdge, start_edge
from tests.edge.rig import as_body, post, routes_config, sign_standard, std_account
from tests.node.runner import NODE_TESTS, run_node_tests, tap_count


@pytest.fixture
async def edge(server: RunningServer) -> AsyncIterator[RunningEdge]:
    running = await start_edge(config_from_data(routes_config(f"127.0.0.1:{server.port}"), {}), listen="127.0.0.1:0")
    yield running
    await running.stop()


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


# Run by wrappers of their own, which also check what the server saw: not run twice.
OWN_WRAPPERS = frozenset(
    {
        "action-cases.test.js",
        "idle-claims.test.js",
        "payloads.test.js",
        "readme-stripe.test.js",
        "server-drain.test.js",
        "silent-path.test.js",
        "tracing.test.js",
        "tracing-setup.test.js",
    }
)


# The worker tests that hold for either path, run again on unary Claims (the edge's events included).
WORKER_FILES = ("worker.test.js", "worker-timeout.test.js", "ordering.test.js", "renewals.test.js")


def node_test_files(transport: str) -> list[Path]:
    """On the Work stream, every Node test file but those with a wrapper of their own; on Claims, WORKER_FILES."""
    if transport == "claim":
        return [NODE_TESTS / name for name in WORKER_FILES]
    every = {p.name for p in NODE_TESTS.glob("*.test.js")}
    assert OWN_WRAPPERS | set(WORKER_FILES) <= every, "a listed file was renamed"
    return sorted(NODE_TESTS / name for name in every - OWN_WRAPPERS)


@pytest.mark.parametrize("transport", ["work", "claim"])
async def test_node_worker_completes_edge_events_renews_leases_and_is_fenced(
    server: RunningServer, edge: RunningEdge, db: Database, transport: str
) -> None:
    acct = std_account()
    keys = [f"msg_{i}" for i in range(3)]
    async with aiohttp.ClientSession() as http:
        for key in keys:
            body = as_body({"type": "invoice.paid", "data": {"id": key}})
            reply = await post(http, f"{edge.url}/hooks/std/{acct}", body, sign_standard(body, key, account=acct))
            assert (reply.status, reply.outcome) == (200, "accepted")

    env = {
        "INBOXD_EDGE_NAMESPACE": f"std/{acct}",
        "INBOXD_EDGE_KEYS": json.dumps(keys),
        "INBOXD_WORKER_TRANSPORT": transport,
    }
    output = await run_node_tests(server, node_test_files(transport), env)
    assert tap_count(output, "pass") >= 11

    states = await event_states(db, f"std/{acct}")
    assert set(states) == set(keys)
    for key, (state, actions) in states.items():
        assert state == "completed", key
        [(action, action_state, idempotency_key)] = actions
        assert (action, action_state) == ("notify:v1", "succeeded"), key
        assert idempotency_key
