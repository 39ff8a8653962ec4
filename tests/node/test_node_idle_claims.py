"""An idle Node worker with waitMs 0 (clients/node/test/idle-claims.test.js), its Claims counted at the server.

The Node test counts the Claims its worker sends; this one counts what the server answered, from
inboxd_rpc_duration_seconds, while that file runs alone against the session's inboxd.
"""

from __future__ import annotations

from inboxd.serving.server import RunningServer
from tests.node.runner import NODE_TESTS, run_node_tests


def claims_answered(server: RunningServer) -> float:
    assert server.ops is not None
    registry = server.ops.metrics.registry
    return registry.get_sample_value("inboxd_rpc_duration_seconds_count", {"method": "Claim", "code": "OK"}) or 0.0


async def test_an_idle_node_worker_that_does_not_long_poll_sends_a_few_claims_not_a_loop(server: RunningServer) -> None:
    before = claims_answered(server)
    await run_node_tests(server, [NODE_TESTS / "idle-claims.test.js"])
    # About 2 s idle (6 Claims at 50 ms doubling to 1 s), then one event taken: before, over a thousand.
    assert claims_answered(server) - before <= 15
