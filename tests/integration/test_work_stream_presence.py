"""Connected workers per namespace: every server process writes its live Work streams, Stats counts them all.

Two `start_server` instances stand for two server processes (or replicas) on
one PostgreSQL. Their clock is the module's own, a year ahead of the other
test servers', so the rows those write (on the real clock or the session's
hand-moved one) are long stale here and never counted. The periodic writes
are put off for an hour: each test writes by hand, as a period's turn would.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import grpc
import pytest

from inboxd.background.presence import PresenceWriter
from inboxd.config.settings import Settings
from inboxd.config.tokens import TokenRegistry
from inboxd.domain.presence import PRESENCE_FORGET_AFTER, PRESENCE_FRESH_FOR, Coverage, PresenceRow
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd.store.presence import replace_presence
from inboxd_client.v1 import admin_pb2
from inboxd_client.v1.admin_pb2_grpc import InboxAdminServiceStub
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import NO_RESCUER, FakeClock
from tests.integration.admin_fixtures import run_cli
from tests.integration.helpers import accept_request
from tests.integration.test_auth import A, B, Tokens, bearer, write_tokens
from tests.integration.work_streams import Worker

BY_HAND = 3600.0


@dataclass
class Pair:
    """Two server processes on one database and one clock; stubs on each, with the root token."""

    one: RunningServer
    two: RunningServer
    clock: FakeClock
    tokens: Tokens
    work_one: InboxServiceStub
    work_two: InboxServiceStub
    admin: InboxAdminServiceStub

    @property
    def root(self) -> list[tuple[str, str]]:
        return bearer(self.tokens.root)

    def writer(self, server: RunningServer) -> PresenceWriter:
        assert server.presence is not None
        return server.presence

    async def write(self) -> None:
        """Both processes' turn to write."""
        await self.writer(self.one).write_now()
        await self.writer(self.two).write_now()

    async def workers(self, ns: str) -> int:
        answer = await self.admin.Stats(admin_pb2.StatsRequest(namespace=ns), metadata=self.root)
        [stats] = answer.namespaces
        return int(stats.connected_workers)

    async def stream(self, stub: InboxServiceStub, namespaces: list[str], worker_id: str, token: str) -> Worker:
        worker = Worker(stub, metadata=bearer(token))
        await worker.subscribe(namespaces, worker_id=worker_id)
        return worker


@pytest.fixture(scope="module")
async def pair(db: Database, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Pair]:
    tokens = write_tokens(tmp_path_factory.mktemp("presence") / "tokens.toml")
    clock = FakeClock()
    clock.advance(365 * 86400)
    settings = Settings(listen="127.0.0.1:0", tokens_file=tokens.file, rescue_interval=NO_RESCUER)
    servers = [await start_server(settings, db, clock=clock, registry=TokenRegistry(tokens.file)) for _ in "12"]
    for server in servers:
        assert server.presence is not None
        server.presence.every(BY_HAND)
    one, two = servers
    async with (
        grpc.aio.insecure_channel(f"127.0.0.1:{one.port}") as chan_one,
        grpc.aio.insecure_channel(f"127.0.0.1:{two.port}") as chan_two,
    ):
        yield Pair(one, two, clock, tokens, InboxServiceStub(chan_one), InboxServiceStub(chan_two),
                   InboxAdminServiceStub(chan_one))  # fmt: skip
    for server in servers:
        await server.stop(1.0)


async def _close(pair: Pair, *workers: Worker) -> None:
    """Ends the streams and writes, so the next test finds no presence of this one's."""
    for worker in workers:
        assert await worker.close() == grpc.StatusCode.OK
    await pair.write()


async def test_streams_on_two_server_processes_both_count_and_an_ended_one_leaves_at_the_next_write(
    pair: Pair, ns: str
) -> None:
    ns = f"{A}/{ns}"
    await pair.work_one.Accept(accept_request(ns, "k"), metadata=pair.root)
    on_one = await pair.stream(pair.work_one, [ns], "worker-on-one", pair.tokens.worker_a)
    on_two = await pair.stream(pair.work_two, [ns, f"{ns}/other"], "worker-on-two", pair.tokens.worker_a)
    # A second stream of the same worker (on the other process) is still one worker.
    again = await pair.stream(pair.work_one, [ns], "worker-on-two", pair.tokens.worker_a)
    assert await pair.workers(ns) == 0, "counted before any process wrote"
    await pair.write()
    assert await pair.workers(ns) == 2
    assert await on_two.close() == grpc.StatusCode.OK
    assert await pair.workers(ns) == 2, "the rows stand until the process writes again"
    await pair.write()
    assert await pair.workers(ns) == 2, "worker-on-two still has a stream on the first process"
    assert await again.close() == grpc.StatusCode.OK
    await pair.write()
    assert await pair.workers(ns) == 1
    await _close(pair, on_one)
    assert await pair.workers(ns) == 0


async def test_a_process_with_no_streams_writes_once_after_its_last_one_then_nothing(pair: Pair, ns: str) -> None:
    writer = pair.writer(pair.two)
    assert not await writer.write_now(), "a process that never had a stream wrote"
    worker = await pair.stream(pair.work_two, [f"{A}/{ns}"], "w", pair.tokens.worker_a)
    assert await writer.write_now()
    assert await worker.close() == grpc.StatusCode.OK
    assert await writer.write_now(), "the write that clears the ended stream's row"
    assert not await writer.write_now()


async def test_a_process_that_stopped_writing_no_longer_counts_after_three_periods(pair: Pair, ns: str) -> None:
    ns = f"{A}/{ns}"
    await pair.work_one.Accept(accept_request(ns, "k"), metadata=pair.root)
    worker = await pair.stream(pair.work_two, [ns], "worker-gone-quiet", pair.tokens.worker_a)
    await pair.write()
    pair.clock.advance(PRESENCE_FRESH_FOR.total_seconds() - 1)
    assert await pair.workers(ns) == 1, "gone before its rows aged out"
    # As a process that died: its rows were not refreshed for three periods.
    pair.clock.advance(2)
    assert await pair.workers(ns) == 0
    await pair.write()
    assert await pair.workers(ns) == 1, "a live process's next write counts again"
    await _close(pair, worker)


async def test_pattern_and_every_namespace_subscriptions_cover_the_namespaces_they_may_claim(
    pair: Pair, ns: str
) -> None:
    granted, other = f"{A}/{ns}_x", f"{B}/{ns}"
    for namespace in (granted, other):
        await pair.work_one.Accept(accept_request(namespace, "k"), metadata=pair.root)
    # worker-a names no namespace: it takes its grants (tenant-a/*); root names none and may see all.
    by_grant = await pair.stream(pair.work_one, [], "by-grant", pair.tokens.worker_a)
    everywhere = await pair.stream(pair.work_two, [], "everywhere", pair.tokens.root)
    await pair.write()
    assert (await pair.workers(granted), await pair.workers(other)) == (2, 1)
    answer = await pair.admin.Stats(admin_pb2.StatsRequest(), metadata=pair.root)
    shown = {s.namespace: s.connected_workers for s in answer.namespaces}
    assert (shown[granted], shown[other]) == (2, 1)
    await _close(pair, by_grant, everywhere)
    assert (await pair.workers(granted), await pair.workers(other)) == (0, 0)


async def _write_transactions(db: Database) -> int:
    """Transactions that wrote, anywhere in the cluster, so far: the next transaction id, read without taking one.

    Exact and at once, where pg_stat_database's counts reach the statistics up to 10 s late.
    """

    async def work(conn: Any) -> int:
        cur = await conn.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint")
        row = await cur.fetchone()
        return int(row[0])

    count: int = await db.run(work, transaction=False)
    return count


async def test_idle_streams_cost_one_statement_per_process_per_period_whatever_their_number(
    pair: Pair, db: Database, ns: str
) -> None:
    ns, streams, period = f"{A}/{ns}", 200, 0.2
    await pair.work_one.Accept(accept_request(ns, "k"), metadata=pair.root)
    idle = [await pair.stream(pair.work_one, [ns], f"idle-{i % 50}", pair.tokens.worker_a) for i in range(streams)]
    writer = pair.writer(pair.one)
    writes_before, before = writer.writes, await _write_transactions(db)
    started = asyncio.get_running_loop().time()
    writer.every(period)
    try:
        await asyncio.sleep(1.0)
    finally:
        writer.every(BY_HAND)
    window = asyncio.get_running_loop().time() - started
    counted, writes = await _write_transactions(db) - before, writer.writes - writes_before
    assert 1 <= writes <= window / period + 1, f"{writes} writes in {window:.2f} s"
    # Each write is its own transaction; a few others (another server's turn) may fall in the window.
    assert counted <= writes + 3, f"{counted} transactions for {writes} writes with {streams} idle streams"
    assert await pair.workers(ns) == 50
    await _close(pair, *idle)


async def test_inboxd_stats_shows_a_workers_column_and_connected_workers_in_its_json(pair: Pair, ns: str) -> None:
    ns = f"{A}/{ns}"
    await pair.work_one.Accept(accept_request(ns, "k"), metadata=pair.root)
    worker = await pair.stream(pair.work_two, [ns], "cli-worker", pair.tokens.worker_a)
    await pair.write()
    target = ["--target", f"127.0.0.1:{pair.one.port}", "--namespace", ns]
    env = {"INBOXD_TOKEN": pair.tokens.root}
    table = await run_cli("stats", *target, env=env)
    assert table.code == 0, table.stderr
    header, row = table.stdout.splitlines()
    assert header.split()[-1] == "WORKERS" and row.split()[-1] == "1", table.stdout
    as_json = await run_cli("stats", *target, "--json", env=env)
    [stats] = json.loads(as_json.stdout)["namespaces"]
    assert stats["connected_workers"] == "1"
    await _close(pair, worker)


async def test_a_stopping_server_clears_its_rows_and_a_long_dead_process_s_rows_are_deleted(
    pair: Pair, db: Database, ns: str
) -> None:
    ns = f"{A}/{ns}"
    await pair.work_one.Accept(accept_request(ns, "k"), metadata=pair.root)
    # A process that died an hour and more ago, as its last write left it.
    gone = [PresenceRow("long-gone", Coverage.NAMESPACE, ns, 1, 0)]
    long_ago = pair.clock.now - PRESENCE_FORGET_AFTER - timedelta(seconds=1)
    await db.run(lambda conn: replace_presence(conn, "dead-host/1/x", gone, long_ago), transaction=False)
    settings = Settings(listen="127.0.0.1:0", tokens_file=pair.tokens.file, rescue_interval=NO_RESCUER)
    third = await start_server(settings, db, clock=pair.clock, registry=TokenRegistry(pair.tokens.file))
    stopped = False
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{third.port}") as chan:
            await pair.stream(InboxServiceStub(chan), [ns], "on-third", pair.tokens.worker_a)
            assert third.presence is not None
            await third.presence.write_now()
            assert await pair.workers(ns) == 1
            assert await _rows_of(db, "dead-host/1/x") == 0, "a long-dead process's rows outlived a write"
            await third.stop(1.0)  # the stream is cut off, and the server's rows go with it
            stopped = True
            assert await pair.workers(ns) == 0
    finally:
        if not stopped:
            await third.stop(1.0)


async def _rows_of(db: Database, process_id: str) -> int:
    async def work(conn: Any) -> int:
        cur = await conn.execute("SELECT count(*) FROM inbox_presence WHERE process_id = %s", (process_id,))
        row = await cur.fetchone()
        return int(row[0])

    count: int = await db.run(work, transaction=False)
    return count
