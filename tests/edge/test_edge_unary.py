"""The cheapest representative edge tests again, on the unary path (`accept_mode = "unary"`).

The stream path is the default, so every other edge test runs on it; these
run the same test functions against an edge forced to unary Accept (among
them a form body and a JSON one claimed byte-exact with their signature's
inputs, since unary Accept and AcceptStream carry them alike).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from inboxd.serving.server import RunningServer
from inboxd_edge.config import config_from_data
from inboxd_edge.serve import RunningEdge, start_edge
from tests.edge.rig import routes_config
from tests.edge.test_edge_http import (
    test_a_standard_webhook_is_accepted_and_its_redelivery_is_a_duplicate_with_2xx,
    test_payload_inboxd_refuses_gets_400_not_2xx,
    test_same_key_with_another_payload_is_a_conflict_still_answered_2xx,
)
from tests.edge.test_reverify import (
    test_a_slack_slash_command_is_claimed_byte_exact_and_verifies_again_with_slack_sdk,
    test_a_twilio_form_is_claimed_byte_exact_and_verifies_again_with_twilios_validator,
    test_github_json_with_its_own_whitespace_is_claimed_byte_exact_and_its_hmac_verifies_again,
)

__all__ = [
    "test_a_slack_slash_command_is_claimed_byte_exact_and_verifies_again_with_slack_sdk",
    "test_a_standard_webhook_is_accepted_and_its_redelivery_is_a_duplicate_with_2xx",
    "test_a_twilio_form_is_claimed_byte_exact_and_verifies_again_with_twilios_validator",
    "test_github_json_with_its_own_whitespace_is_claimed_byte_exact_and_its_hmac_verifies_again",
    "test_payload_inboxd_refuses_gets_400_not_2xx",
    "test_same_key_with_another_payload_is_a_conflict_still_answered_2xx",
]


@pytest.fixture(scope="module")
async def edge(server: RunningServer) -> AsyncIterator[RunningEdge]:
    """This module's edge: unary Accept only (the session's `edge` forwards over streams)."""
    config = config_from_data(routes_config(f"127.0.0.1:{server.port}", accept_mode="unary"), {})
    running = await start_edge(config, listen="127.0.0.1:0")
    assert not running.forwarder.streaming
    yield running
    await running.stop()
