"""Fixtures: one real PostgreSQL per test run and a real grpc.aio server on port 0.

Set DATABASE_URL to use a PostgreSQL you run; otherwise a throwaway cluster
is started (as the `postgres` user when running as root) and removed after.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest

from inboxd.config.settings import Settings
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd.store.migrate import migrate
from inboxd_client.v1 import admin_pb2_grpc, inbox_pb2_grpc
from tests.harness import discard_postgres, throwaway_postgres

# Each worker's reliability table, as the worker sent it home (pytest-xdist).
_RELIABILITY_FROM_WORKERS: list[str] = []


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under pytest-xdist (`make pytest`), one file's tests run in one process, and all the reliability suite in one.

    A file's module fixtures (a server of its own, a Node runtime) are then set
    up once, and the reliability totals see every scenario's tally. (xdist's own
    `--dist loadgroup` cannot say this under pytest 9: the node ids it rewrites
    to carry a group no longer change.)
    """
    from xdist.scheduler import LoadFileScheduling

    class ByFileReliabilityWhole(LoadFileScheduling):  # type: ignore[misc]  # xdist is untyped
        def _split_scope(self, nodeid: str) -> str:
            return "tests/reliability" if nodeid.startswith("tests/reliability/") else super()._split_scope(nodeid)

    return ByFileReliabilityWhole(config, log)


def pytest_testnodedown(node: Any, error: object) -> None:
    """A pytest-xdist worker finished: keep the reliability table it sent (tests/reliability/conftest.py)."""
    _RELIABILITY_FROM_WORKERS.extend(getattr(node, "workeroutput", {}).get("inboxd_reliability", []))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _RELIABILITY_FROM_WORKERS:
        terminalreporter.section("inboxd reliability")
        for line in _RELIABILITY_FROM_WORKERS:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    if os.environ.get("DATABASE_URL"):
        yield os.environ["DATABASE_URL"]
        return
    pg = throwaway_postgres()
    try:
        yield pg.conninfo
    finally:
        discard_postgres(pg)


@pytest.fixture(scope="session")
async def migrated_url(database_url: str) -> str:
    await migrate(database_url)
    return database_url


@pytest.fixture(scope="session")
async def db(migrated_url: str) -> AsyncIterator[Database]:
    database = Database(migrated_url, max_size=30)
    await database.open()
    yield database
    await database.close()


# Test servers on the real clock share the database with servers on a hand-moved
# clock, whose leases can look long expired in real time: no test server runs
# the lease rescuer unless its test is about it (tests/integration/test_rescuer.py).
NO_RESCUER = timedelta(0)
# Likewise no test server carries bulk operations on unless its test is about them
# (tests/integration/test_bulk_*.py): a server on a hand-moved clock would set a replay's due times by it.
NO_BULK_RUNNER = timedelta(0)
# Nor delivers to destinations unless its test is about them (tests/integration/test_destinations*.py).
NO_DESTINATIONS = timedelta(0)


@pytest.fixture(scope="session")
def settings() -> Settings:
    return Settings(
        listen="127.0.0.1:0", rescue_interval=NO_RESCUER, bulk_poll=NO_BULK_RUNNER, destinations_poll=NO_DESTINATIONS
    )


@pytest.fixture(scope="session")
async def server(settings: Settings, db: Database) -> AsyncIterator[RunningServer]:
    running = await start_server(settings, db)
    yield running
    await running.stop(1.0)


# A poller that never looks on its own: a waiting Claim that gets an event was woken by a signal.
NO_FALLBACK = 3600.0


@pytest.fixture(scope="module")
async def quiet_server(db: Database) -> AsyncIterator[RunningServer]:
    """A server of the module's own, with no fallback poll."""
    running = await start_server(
        Settings(
            listen="127.0.0.1:0",
            rescue_interval=NO_RESCUER,
            bulk_poll=NO_BULK_RUNNER,
            destinations_poll=NO_DESTINATIONS,
        ),
        db,
    )
    running.inbox.fallback_poll_seconds = NO_FALLBACK
    yield running
    await running.stop(1.0)


@pytest.fixture(scope="session")
async def channel(server: RunningServer) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as chan:
        yield chan


@pytest.fixture(scope="session")
def inbox(channel: grpc.aio.Channel) -> inbox_pb2_grpc.InboxServiceStub:
    return inbox_pb2_grpc.InboxServiceStub(channel)


@pytest.fixture(scope="session")
def admin(channel: grpc.aio.Channel) -> admin_pb2_grpc.InboxAdminServiceStub:
    return admin_pb2_grpc.InboxAdminServiceStub(channel)


@pytest.fixture
def ns() -> str:
    """A namespace of this test's own, so tests never see each other's events."""
    return f"test/{uuid.uuid4().hex[:12]}"


class FakeClock:
    """The clock a test moves by hand: leases expire and backoffs pass without sleeping."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


CLOCKED_SETTINGS = Settings(
    listen="127.0.0.1:0",
    max_attempts=3,
    backoff_base=timedelta(seconds=1),
    backoff_factor=2.0,
    backoff_cap=timedelta(seconds=60),
    # Tests that move the clock past an expiry and its grace (to complete on an
    # unreclaimed lease, say) must not race a background rescue.
    rescue_interval=NO_RESCUER,
    bulk_poll=NO_BULK_RUNNER,
    destinations_poll=NO_DESTINATIONS,
)


@pytest.fixture(scope="session")
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(scope="session")
async def clocked_server(db: Database, clock: FakeClock) -> AsyncIterator[RunningServer]:
    """A server whose time is `clock`; only ever moved forward, by tests in their own namespaces."""
    running = await start_server(CLOCKED_SETTINGS, db, clock=clock)
    yield running
    await running.stop(1.0)


@pytest.fixture(scope="session")
async def work(clocked_server: RunningServer) -> AsyncIterator[inbox_pb2_grpc.InboxServiceStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{clocked_server.port}") as chan:
        yield inbox_pb2_grpc.InboxServiceStub(chan)
