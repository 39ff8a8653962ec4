"""/metrics under concurrent scrapes: one Stats query (a full-table scan) at a time, never one per scrape."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import pytest

from inboxd.background import duties as operations
from inboxd.config.settings import Settings
from inboxd.domain.operator_views import NamespaceStats
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from tests.conftest import NO_RESCUER
from tests.harness import eventually
from tests.integration.test_metrics import http_get

SCRAPES = 5


@pytest.fixture
async def metered(db: Database) -> AsyncIterator[RunningServer]:
    running = await start_server(
        Settings(rescue_interval=NO_RESCUER, listen="127.0.0.1:0", metrics_listen="127.0.0.1:0"), db
    )
    yield running
    await running.stop(1.0)


async def test_concurrent_scrapes_run_one_stats_query_and_the_others_serve_the_last_figure(
    metered: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    ops = metered.ops
    assert ops is not None and ops.metrics_port is not None
    port = ops.metrics_port
    real_stats = ops.operators.stats
    gate = asyncio.Event()
    queries = 0

    async def held_stats(namespace: str | None) -> Sequence[NamespaceStats]:
        """The real Stats query, held until the test opens the gate: a slow scan, on demand."""
        nonlocal queries
        queries += 1
        await gate.wait()
        return await real_stats(namespace)

    await ops.refresh_stats()  # the start-up refresh is over: no query in flight, the next one 15 s away
    monkeypatch.setattr(ops.operators, "stats", held_stats)
    monkeypatch.setattr(operations, "STATS_FRESH_SECONDS", 0.0)  # every scrape wants fresh gauges
    first = asyncio.create_task(http_get(port, "/metrics"))
    await eventually(lambda: queries == 1, "the first scrape to start a Stats query")
    # While that query runs, every other scrape is answered (with the last figure), none starts a scan.
    others = await asyncio.wait_for(asyncio.gather(*(http_get(port, "/metrics") for _ in range(SCRAPES - 1))), 60)
    queries_while_held = queries
    gate.set()
    status, body = await asyncio.wait_for(first, 30)
    assert queries_while_held == 1, f"{queries_while_held} Stats queries for {SCRAPES} concurrent scrapes"
    assert status == "HTTP/1.1 200 OK"
    for other_status, other_body in others:
        assert other_status == "HTTP/1.1 200 OK"
        assert "inboxd_stats_refreshed_timestamp_seconds" in other_body
    assert "inboxd_stats_refreshed_timestamp_seconds" in body
