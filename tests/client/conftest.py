"""Fixtures for the client's tests: clients of the real servers, a server with attempts to spare, both worker paths."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from inboxd.config.settings import Settings
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd_client import AsyncInboxClient, RetryPolicy, Worker
from tests.conftest import NO_RESCUER

# Short backoffs: a test of a retried call should not wait out production pauses.
FAST_RETRY = RetryPolicy(max_attempts=5, initial_backoff=0.01, max_backoff=0.05)


@pytest.fixture
async def client(server: RunningServer) -> AsyncIterator[AsyncInboxClient]:
    """A client of the real-time server."""
    async with AsyncInboxClient(f"127.0.0.1:{server.port}", retry=FAST_RETRY, timeout=10.0) as c:
        yield c


@pytest.fixture
async def clocked_client(clocked_server: RunningServer) -> AsyncIterator[AsyncInboxClient]:
    """A client of the server whose time is the `clock` fixture (3 attempts, backoff from 1 s)."""
    async with AsyncInboxClient(f"127.0.0.1:{clocked_server.port}", retry=FAST_RETRY, timeout=10.0) as c:
        yield c


@pytest.fixture(scope="module")
async def patient_server(db: Database) -> AsyncIterator[RunningServer]:
    """A real-time server with attempts to spare, for workers killed over and over."""
    running = await start_server(Settings(listen="127.0.0.1:0", max_attempts=100, rescue_interval=NO_RESCUER), db)
    yield running
    await running.stop(1.0)


WORKER_PATHS = ("stream", "unary")


@pytest.fixture(params=WORKER_PATHS)
def worker_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs the test once per Worker path: the Work stream (forced, so no silent fallback) and unary Claims.

    It sets the default of Worker's `use_streams`, so a test's own `Worker(...)`
    calls need no change; a test that passes `use_streams` keeps its own.
    """
    defaults = vars(Worker)["__init__"].__kwdefaults__
    monkeypatch.setitem(defaults, "use_streams", request.param == "stream")
    return str(request.param)
