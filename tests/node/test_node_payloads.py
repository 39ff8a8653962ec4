"""The Node runtime's payloads (clients/node/test/payloads.test.js): bytes, content type and json(), alone.

That file runs here only, once (test_node_worker.py leaves it out): its tests hold on either
worker path, and running it beside every other file would only make the suite longer.
"""

from __future__ import annotations

from inboxd.serving.server import RunningServer
from tests.node.runner import NODE_TESTS, run_node_tests, tap_count


async def test_node_handlers_get_bytes_content_type_and_json_only_where_it_parses(server: RunningServer) -> None:
    output = await run_node_tests(server, [NODE_TESTS / "payloads.test.js"])
    assert tap_count(output, "pass") >= 6
