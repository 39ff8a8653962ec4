"""The edge's connection cap when every slot carries a request, its arithmetic, and its descriptor log."""

from __future__ import annotations

import asyncio
import errno
import logging
from typing import Any

import pytest
from prometheus_client import REGISTRY

from inboxd.serving.server import RunningServer
from inboxd_edge.config import config_from_data
from inboxd_edge.edge_descriptors import OutOfDescriptorsLog
from inboxd_edge.edge_limits import MIN_CONNECTIONS, RESERVED_DESCRIPTORS, connection_cap
from inboxd_edge.serve import start_edge
from tests.edge.rig import routes_config
from tests.integration.helpers import captured_logs


def closed_over_cap() -> float:
    value = REGISTRY.get_sample_value("inboxd_edge_connections_closed_early_total", {"reason": "over_cap"})
    return value or 0.0


async def test_at_the_cap_with_every_slot_carrying_a_request_a_new_connection_is_closed(
    server: RunningServer,
) -> None:
    config = config_from_data({**routes_config(f"127.0.0.1:{server.port}"), "limits": {"max_connections": 8}}, {})
    edge = await start_edge(config, listen="127.0.0.1:0")
    before = closed_over_cap()
    held: list[asyncio.StreamWriter] = []
    try:
        # Eight requests whose headers are in and whose bodies never come: each slot carries a request.
        for _ in range(8):
            _, writer = await asyncio.open_connection(edge.host, edge.port)
            writer.write(b"POST /hooks/stripe HTTP/1.1\r\nHost: edge\r\nContent-Length: 100\r\n\r\n{")
            await writer.drain()
            held.append(writer)
        front = edge.front
        assert front is not None
        for _ in range(100):
            if front.guard.open_connections == 8:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)  # their handlers start reading the bodies
        reader, writer = await asyncio.open_connection(edge.host, edge.port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: edge\r\n\r\n")
        # The ninth is closed at once, unanswered: none of the eight may be cut mid-request for it.
        assert await asyncio.wait_for(reader.read(), 10) == b""
        writer.close()
        assert closed_over_cap() == before + 1
    finally:
        for writer in held:
            writer.close()
        await edge.stop()


@pytest.mark.parametrize(("limit", "cap"), [(256, 192), (20000, 1000), (None, 1000), (40, MIN_CONNECTIONS)])
def test_the_cap_leaves_the_reserve_its_descriptors(limit: int | None, cap: int) -> None:
    assert connection_cap(1000, limit) == cap
    if limit is not None and limit > RESERVED_DESCRIPTORS + MIN_CONNECTIONS:
        assert connection_cap(1000, limit) + RESERVED_DESCRIPTORS <= limit


def test_running_out_of_descriptors_is_logged_once_a_minute_not_per_accept() -> None:
    now = [0.0]
    seen: list[dict[str, Any]] = []
    handler = OutOfDescriptorsLog(lambda _loop, context: seen.append(context), interval=60.0, clock=lambda: now[0])
    loop = asyncio.new_event_loop()
    out_of_fds = {"message": "socket.accept() out of system resource", "exception": OSError(errno.EMFILE, "x")}
    try:
        with captured_logs(logging.ERROR) as logs:
            for second in range(120):
                now[0] = float(second)
                handler(loop, out_of_fds)
            handler(loop, {"message": "something else"})
    finally:
        loop.close()
    assert logs.getvalue().count("out of file descriptors") == 2
    assert "59 more such errors" in logs.getvalue()
    assert seen == [{"message": "something else"}]
