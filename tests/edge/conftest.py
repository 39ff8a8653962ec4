"""Fixtures for the edge tests: an edge in this process, in front of the session's in-process inboxd."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from inboxd.serving.server import RunningServer
from inboxd_edge.config import config_from_data
from inboxd_edge.serve import RunningEdge, start_edge
from tests.edge.rig import routes_config


@pytest.fixture(scope="session")
async def edge(server: RunningServer) -> AsyncIterator[RunningEdge]:
    running = await start_edge(config_from_data(routes_config(f"127.0.0.1:{server.port}"), {}), listen="127.0.0.1:0")
    yield running
    await running.stop()


@pytest.fixture(scope="session")
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session
