"""The Node runtime's payloads, alone: bytes, content type and json(), and the README's Stripe handler.

clients/node/test/payloads.test.js and readme-stripe.test.js run here only, once
(test_node_worker.py leaves them out): their tests hold on either worker path.
"""

from __future__ import annotations

from inboxd.serving.server import RunningServer
from tests.node.runner import NODE_TESTS, run_node_tests, tap_count


async def test_node_handlers_get_bytes_content_type_and_json_only_where_it_parses(server: RunningServer) -> None:
    output = await run_node_tests(server, [NODE_TESTS / "payloads.test.js", NODE_TESTS / "readme-stripe.test.js"])
    assert tap_count(output, "pass") >= 9
