"""The Python worker's event context carries the ordering key, the revision and the key's applied revision."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from inboxd.domain.vocabulary import StaleRevisions
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd_client import AsyncInboxClient, EventContext, Ignore, Worker
from tests.client.conftest import FAST_RETRY
from tests.client.helpers import eventually, read_event, running
from tests.conftest import CLOCKED_SETTINGS

# Each test runs on the Work stream and on unary Claims (tests/client/conftest.py).
pytestmark = pytest.mark.usefixtures("worker_path")


@pytest.fixture(scope="module")
async def delivering_server(db: Database) -> AsyncIterator[RunningServer]:
    """A server that hands stale revisions out flagged (INBOXD_STALE_REVISIONS=deliver)."""
    settings = replace(CLOCKED_SETTINGS, stale_revisions=StaleRevisions.DELIVER)
    running_server = await start_server(settings, db)
    yield running_server
    await running_server.stop(1.0)


@pytest.fixture
async def delivering(delivering_server: RunningServer) -> AsyncIterator[AsyncInboxClient]:
    async with AsyncInboxClient(f"127.0.0.1:{delivering_server.port}", retry=FAST_RETRY, timeout=10.0) as c:
        yield c


async def test_a_handler_sees_the_revisions_and_ignores_a_stale_one_by_the_rule(
    delivering: AsyncInboxClient, db: Database, ns: str
) -> None:
    seen: list[tuple[str, str, int, int, bool]] = []

    async def handle(ctx: EventContext) -> Ignore | None:
        seen.append((ctx.event_key, ctx.ordering_key, ctx.revision, ctx.applied_revision, ctx.stale))
        if ctx.stale:
            return Ignore(f"revision {ctx.revision} is at or below applied {ctx.applied_revision}")
        return None

    worker = Worker(delivering, handle, namespaces=[ns], wait=0.2)
    async with running(worker):
        await delivering.accept(ns, "v5", "customer.updated", {"v": 5}, ordering_key="customer-9", revision=5)
        await eventually(lambda: worker.stats.completed == 1, "revision 5 applied")
        await delivering.accept(ns, "v4", "customer.updated", {"v": 4}, ordering_key="customer-9", revision=4)
        await eventually(lambda: worker.stats.ignored == 1, "revision 4 ignored by the handler")
    assert seen == [("v5", "customer-9", 5, 0, False), ("v4", "customer-9", 4, 5, True)]
    row = await read_event(db, ns, "v4")
    assert (row["disposition"], row["disposition_reason"]) == ("ignored", "revision 4 is at or below applied 5")
