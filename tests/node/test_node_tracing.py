"""The Node client's and runtime's tracing (clients/node/test/tracing*.test.js) against the session's inboxd.

tracing.test.js registers a real OpenTelemetry SDK provider with an in-memory exporter and checks the
handler's `process` span (a child of the event's stored context, or a new root linked to it for a
replay or an old trace), the `action` spans, and the trace context each call carries, on a grpc-js
proxy; it runs on the Work stream and on unary Claims, as the worker tests do. tracing-setup.test.js
checks the OTEL_* on/off rule and workers in child processes that install the SDK from the variables
alone (console exporter), find it missing, or refuse a setting.
"""

from __future__ import annotations

import pytest

from inboxd.serving.server import RunningServer
from tests.node.runner import NODE_TESTS, run_node_tests, tap_count

SPAN_TESTS = 8
SETUP_TESTS = 9


@pytest.mark.parametrize("transport", ["work", "claim"])
async def test_node_worker_spans_join_the_delivery_trace_and_its_calls_carry_them(
    server: RunningServer, transport: str
) -> None:
    output = await run_node_tests(server, [NODE_TESTS / "tracing.test.js"], {"INBOXD_WORKER_TRANSPORT": transport})
    assert tap_count(output, "pass") == SPAN_TESTS


async def test_node_tracing_is_on_only_as_the_otel_rule_says_and_installs_the_sdk_itself(server: RunningServer) -> None:
    output = await run_node_tests(server, [NODE_TESTS / "tracing-setup.test.js"])
    assert tap_count(output, "pass") == SETUP_TESTS
