"""The Node runtime's job.action runs every case of tests/shared/action_cases.json against the session's inboxd.

The Python runtime runs the same table (tests/client/test_action_cases.py), so the two cannot drift.
"""

from __future__ import annotations

from inboxd.serving.server import RunningServer
from tests.node.runner import NODE_TESTS, run_node_tests, tap_count
from tests.shared.action_cases import load_action_cases


async def test_node_job_action_does_what_the_shared_table_says_in_every_case(server: RunningServer) -> None:
    output = await run_node_tests(server, [NODE_TESTS / "action-cases.test.js"])
    assert tap_count(output, "pass") == len(load_action_cases())
