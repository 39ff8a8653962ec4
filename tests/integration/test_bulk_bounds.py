"""What a tenant-scoped admin's bulk operations may cost the database: connections, how many run, their rate, a cancel.

Each test drives `inboxd serve` in a process of its own from outside, with a
token granted one namespace. Its connections to PostgreSQL carry an
application_name of their own, so pg_stat_activity counts exactly them.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import grpc
import psycopg.conninfo
import pytest

from inboxd.config.tokens import Scope, entry_toml, new_token
from inboxd.store.database import Database
from inboxd_client.v1 import admin_pb2
from inboxd_client.v1.admin_pb2_grpc import InboxAdminServiceStub
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.harness import ServerProcess
from tests.integration.bulk_fixtures import CANCELLED, DONE, RUNNING, dead_letters, get, request
from tests.integration.procs import poll

STARTS = 200
POOL_SIZE = 4
# The slowest pace a start may ask for: one chunk of one event, then ten seconds' wait.
SLOWEST = 0.1


def _tenant_admin(tmp_path: Path, ns: str) -> tuple[Path, list[tuple[str, str]]]:
    token = new_token()
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(entry_toml(f"tenant-admin-{ns}", token, [Scope.ADMIN], [ns]))
    return tokens, [("authorization", f"Bearer {token}")]


def _server(migrated_url: str, tokens: Path, **env: str) -> tuple[ServerProcess, str]:
    """A carrying server whose every PostgreSQL connection is named, so they can be counted."""
    name = f"bulk-bounds-{uuid.uuid4().hex[:8]}"
    url = psycopg.conninfo.make_conninfo(migrated_url, application_name=name)
    carrier = {
        "INBOXD_TOKENS_FILE": str(tokens),
        "INBOXD_BULK_POLL": "50ms",
        "INBOXD_POOL_SIZE": str(POOL_SIZE),
        # The deployment's cap counts other tests' operations too (tests/unit/test_bulk_bounds.py checks it).
        "INBOXD_BULK_MAX_RUNNING": "100000",
    }
    return ServerProcess(database_url=url, env={**carrier, **env}), name


async def _connections(db: Database, name: str) -> int:
    async def read(conn: Any) -> int:
        cur = await conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,))
        row = await cur.fetchone()
        return int(row[0])

    count: int = await db.run(read)
    return count


async def _carried(db: Database, actor: str) -> int:
    """How many of the actor's operations have run a chunk (their cursor moved)."""

    async def read(conn: Any) -> int:
        cur = await conn.execute(
            "SELECT count(*) FROM inbox_bulk_operations WHERE actor = %s AND cursor > 0 AND state = 'running'",
            (actor,),
        )
        row = await cur.fetchone()
        return int(row[0])

    count: int = await db.run(read)
    return count


async def _start_all(stub: InboxAdminServiceStub, ns: str, auth: Any, count: int) -> list[grpc.StatusCode]:
    async def one(_: int) -> grpc.StatusCode:
        try:
            await stub.StartBulkOperation(request(ns, rate=SLOWEST), metadata=auth)
        except grpc.aio.AioRpcError as exc:
            return exc.code()
        return grpc.StatusCode.OK

    codes: list[grpc.StatusCode] = []
    for first in range(0, count, 20):
        codes += await asyncio.gather(*(one(i) for i in range(first, min(count, first + 20))))
    return codes


async def _cancel_all(stub: InboxAdminServiceStub, auth: Any) -> None:
    """Every operation the token still runs, cancelled: left RUNNING, the next carrying server would carry them."""
    listed = await stub.ListBulkOperations(admin_pb2.ListBulkOperationsRequest(page_size=100), metadata=auth)
    while True:
        await asyncio.gather(
            *(
                stub.CancelBulkOperation(
                    admin_pb2.CancelBulkOperationRequest(id=op.id, reason="test over"), metadata=auth
                )
                for op in listed.operations
                if op.state == RUNNING
            )
        )
        if not listed.next_page_token:
            return
        listed = await stub.ListBulkOperations(
            admin_pb2.ListBulkOperationsRequest(page_size=100, page_token=listed.next_page_token), metadata=auth
        )


async def test_200_slow_bulk_operations_of_a_tenant_admin_share_a_bounded_number_of_database_connections(
    migrated_url: str, inbox: InboxServiceStub, db: Database, ns: str, tmp_path: Path
) -> None:
    """Caps raised out of the way: every one of the 200 runs at once, and the replica's connections stay its pool's."""
    await dead_letters(inbox, ns, 20)
    tokens, auth = _tenant_admin(tmp_path, ns)
    server, name = _server(migrated_url, tokens, INBOXD_BULK_MAX_RUNNING_PER_TOKEN=str(STARTS))
    await asyncio.to_thread(server.start)
    try:
        async with grpc.aio.insecure_channel(server.target) as channel:
            stub = InboxAdminServiceStub(channel)
            codes = await _start_all(stub, ns, auth, STARTS)
            assert set(codes) == {grpc.StatusCode.OK}
            most = 0

            async def all_carried() -> bool | None:
                nonlocal most
                most = max(most, await _connections(db, name))
                return True if await _carried(db, f"tenant-admin-{ns}") == STARTS else None

            await poll(all_carried, within=60, interval=0.1)
            for _ in range(10):  # through the pace sleeps that follow
                most = max(most, await _connections(db, name))
                await asyncio.sleep(0.1)
            await _cancel_all(stub, auth)
    finally:
        server.kill()
    print(f"\n{STARTS} running bulk operations: the replica held at most {most} PostgreSQL connections")
    # Its pool, the connection holding the operations' locks, and the signals' sender: never one per operation.
    assert most <= POOL_SIZE + 3, most


async def test_a_tenant_admin_over_the_caps_is_refused_resource_exhausted_and_a_refused_start_leaves_nothing(
    migrated_url: str, inbox: InboxServiceStub, db: Database, ns: str, tmp_path: Path
) -> None:
    await dead_letters(inbox, ns, 5)
    tokens, auth = _tenant_admin(tmp_path, ns)
    server, _ = _server(migrated_url, tokens, INBOXD_BULK_MAX_RUNNING_PER_TOKEN="3")
    await asyncio.to_thread(server.start)
    try:
        async with grpc.aio.insecure_channel(server.target) as channel:
            stub = InboxAdminServiceStub(channel)
            codes = await _start_all(stub, ns, auth, STARTS)
            assert codes.count(grpc.StatusCode.OK) == 3
            assert codes.count(grpc.StatusCode.RESOURCE_EXHAUSTED) == STARTS - 3
            try:
                await stub.StartBulkOperation(request(ns, rate=SLOWEST), metadata=auth)
                raise AssertionError("a fourth start was taken")
            except grpc.aio.AioRpcError as exc:
                assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert "3 bulk operations running" in (exc.details() or ""), exc.details()
                assert "INBOXD_BULK_MAX_RUNNING_PER_TOKEN" in (exc.details() or ""), exc.details()
            listed = await stub.ListBulkOperations(admin_pb2.ListBulkOperationsRequest(page_size=100), metadata=auth)
            assert len(listed.operations) == 3, "a refused start left an operation behind"
            # A dry run changes nothing and ends at once: never refused.
            dry = await stub.StartBulkOperation(request(ns, dry_run=True), metadata=auth)
            assert dry.operation.state == DONE
            # Once one ends, there is room again.
            await stub.CancelBulkOperation(
                admin_pb2.CancelBulkOperationRequest(id=listed.operations[0].id, reason="room"), metadata=auth
            )
            await stub.StartBulkOperation(request(ns, rate=SLOWEST), metadata=auth)
            await _cancel_all(stub, auth)
    finally:
        server.kill()


@pytest.mark.parametrize("through", ["another-replica", "the-carrier"])
async def test_a_cancel_during_a_pace_sleep_frees_the_operation_within_a_second(
    migrated_url: str,
    inbox: InboxServiceStub,
    admin: InboxAdminServiceStub,
    db: Database,
    ns: str,
    tmp_path: Path,
    through: str,
) -> None:
    """Cancelled through another replica or through the carrier itself, ten seconds' sleep is cut short.

    Another replica (the test's own server): the carrier's watcher sees it; the carrier: its sleep is woken directly.
    """
    await dead_letters(inbox, ns, 5)
    tokens, auth = _tenant_admin(tmp_path, ns)
    server, _ = _server(migrated_url, tokens)
    await asyncio.to_thread(server.start)
    try:
        async with grpc.aio.insecure_channel(server.target) as channel:
            stub = InboxAdminServiceStub(channel)
            op_id = (await stub.StartBulkOperation(request(ns, rate=SLOWEST), metadata=auth)).operation.id
            lock = _lock_of(op_id)

            async def sleeping() -> bool | None:
                return True if (await get(admin, op_id)).done == 1 and await _held(db, lock) else None

            await poll(sleeping, within=30, interval=0.05)
            await asyncio.sleep(0.5)  # well into its ten seconds' pace sleep
            cancel = admin_pb2.CancelBulkOperationRequest(id=op_id, reason="wrong filter")
            if through == "the-carrier":
                cancelled = await stub.CancelBulkOperation(cancel, metadata=auth)
            else:
                cancelled = await admin.CancelBulkOperation(cancel)
            began = time.monotonic()
            assert (cancelled.operation.state, cancelled.operation.done) == (CANCELLED, 1)

            async def freed() -> bool | None:
                return None if await _held(db, lock) else True

            await poll(freed, within=15, interval=0.02)
            took = time.monotonic() - began
    finally:
        server.kill()
    print(f"\nthe carrier let its operation go {took:.2f} s after the cancel through {through}")
    assert took < 2.5, took


def _lock_of(op_id: str) -> int:
    from inboxd.background.bulk_runner import operation_lock

    return operation_lock(uuid.UUID(op_id)) & 0xFFFFFFFFFFFFFFFF


async def _held(db: Database, lock: int) -> bool:
    async def read(conn: Any) -> bool:
        cur = await conn.execute(
            "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND classid = %s::oid AND objid = %s::oid"
            " AND objsubid = 1 AND granted",
            (lock >> 32, lock & 0xFFFFFFFF),
        )
        return await cur.fetchone() is not None

    held: bool = await db.run(read)
    return held


async def test_a_rate_below_the_floor_is_refused_naming_the_floor(
    migrated_url: str, inbox: InboxServiceStub, ns: str, tmp_path: Path
) -> None:
    """1e-300 events per second: a pace wait of 1e300 s, and due times no timedelta can hold."""
    await dead_letters(inbox, ns, 2)
    tokens, auth = _tenant_admin(tmp_path, ns)
    server, _ = _server(migrated_url, tokens)
    await asyncio.to_thread(server.start)
    try:
        async with grpc.aio.insecure_channel(server.target) as channel:
            stub = InboxAdminServiceStub(channel)
            for rate in (1e-300, 0.05):
                try:
                    await stub.StartBulkOperation(request(ns, rate=rate), metadata=auth)
                    raise AssertionError(f"rate {rate:g} was taken")
                except grpc.aio.AioRpcError as exc:
                    assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, exc.details()
                    assert "rate" in (exc.details() or "") and "0.1" in (exc.details() or ""), exc.details()
            listed = await stub.ListBulkOperations(admin_pb2.ListBulkOperationsRequest(page_size=100), metadata=auth)
            assert list(listed.operations) == []
    finally:
        server.kill()
