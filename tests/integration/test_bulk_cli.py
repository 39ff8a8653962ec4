"""`inboxd bulk replay|ignore|list|show|cancel`, run as real processes against a server that carries operations."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from inboxd.config.settings import Settings
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd_client.v1 import admin_pb2
from inboxd_client.v1.admin_pb2_grpc import InboxAdminServiceStub
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import NO_RESCUER
from tests.harness import REPO
from tests.integration.admin_fixtures import run_cli
from tests.integration.bulk_fixtures import CANCELLED, RUNNING, audit_rows, dead_letters, get, key, states


@pytest.fixture(scope="module")
async def carrier(db: Database) -> AsyncIterator[RunningServer]:
    """A server whose bulk runner looks for operations every 50 ms (the session's servers run none)."""
    settings = Settings(listen="127.0.0.1:0", rescue_interval=NO_RESCUER, bulk_poll=timedelta(milliseconds=50))
    running = await start_server(settings, db)
    yield running
    await running.stop(1.0)


async def test_a_dry_run_previews_then_a_replay_follows_its_progress_to_the_end(
    carrier: RunningServer, inbox: InboxServiceStub, db: Database, ns: str
) -> None:
    await dead_letters(inbox, ns, 8)
    at = ["--target", f"127.0.0.1:{carrier.port}"]
    dry = await run_cli("bulk", "replay", "-n", ns, "--error-contains", "SMTP", "--reason", "outage", "--dry-run", *at)
    assert dry.code == 0, dry.stderr
    lines = dry.stdout.splitlines()
    assert lines[0] == "dry run: 8 events match; nothing changed"
    assert [line.split()[1] for line in lines[3:]] == [key(i) for i in range(8)]
    assert set((await states(db, ns)).values()) == {"dead_lettered"}

    run = await run_cli("bulk", "replay", "-n", ns, "--rate", "40", "--reason", "outage", *at)
    assert run.code == 0, run.stderr
    assert run.stdout.startswith("operation ") and ": 8 events match" in run.stdout.splitlines()[0]
    # The bar's last state (drawn once at the end when stdout is not a terminal), then the summary.
    assert "replay DONE" in run.stdout and "8/8" in run.stdout and "skipped 0" in run.stdout
    assert run.stdout.splitlines()[-1].startswith("DONE: 8/8 changed, 0 skipped, ")
    op_id = run.stdout.split()[1].rstrip(":")
    assert len(await audit_rows(db, op_id)) == 8


async def test_no_wait_prints_the_id_then_show_list_and_cancel_find_it(
    carrier: RunningServer, inbox: InboxServiceStub, db: Database, ns: str
) -> None:
    await dead_letters(inbox, ns, 20)
    at = ["--target", f"127.0.0.1:{carrier.port}"]
    # One event a second: still running when the cancel comes, a few CLI runs later.
    started = await run_cli("bulk", "ignore", "-n", ns, "--rate", "1", "--reason", "junk", "--no-wait", *at)
    assert started.code == 0, started.stderr
    op_id = started.stdout.strip()
    shown = await run_cli("bulk", "show", op_id, *at)
    assert shown.code == 0, shown.stderr
    assert f"id            {op_id}" in shown.stdout and "action        IGNORE" in shown.stdout
    assert "matched       20" in shown.stdout and f"namespace     {ns}" in shown.stdout
    listed = await run_cli("bulk", "list", "--limit", "100", *at)
    [row] = [line for line in listed.stdout.splitlines() if line.startswith(op_id)]
    assert "IGNORE" in row and ns in row and "/20" in row
    cancelled = await run_cli("bulk", "cancel", op_id, "--reason", "changed my mind", *at)
    assert cancelled.code == 0, cancelled.stderr
    assert cancelled.stdout.startswith("CANCELLED: ")
    done = int(cancelled.stdout.split()[1].split("/")[0])
    assert done < 20 and len(await audit_rows(db, op_id)) == done


async def test_errors_print_the_servers_words_and_exit_non_zero(carrier: RunningServer) -> None:
    at = ["--target", f"127.0.0.1:{carrier.port}"]
    unknown = await run_cli("bulk", "show", "not-an-id", *at)
    assert unknown.code == 1 and "NOT_FOUND: no bulk operation 'not-an-id'" in unknown.stderr
    refused = await run_cli("bulk", "replay", "-n", "x", "--state", "pending", "--reason", "r", *at)
    assert refused.code == 1 and "INVALID_ARGUMENT: filter.states[0]: is PENDING" in refused.stderr


async def test_ctrl_c_stops_following_and_leaves_the_operation_running(
    carrier: RunningServer, inbox: InboxServiceStub, admin: InboxAdminServiceStub, ns: str
) -> None:
    await dead_letters(inbox, ns, 10)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("INBOXD_")}
    args = ["-m", "inboxd", "bulk", "replay", "-n", ns, "--rate", "2", "--reason", "slowly"]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *args,
        "--target",
        f"127.0.0.1:{carrier.port}",
        cwd=REPO,
        env=clean,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        first = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        assert first.startswith("operation "), first
        op_id = first.split()[1].rstrip(":")
        proc.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
    stderr = err.decode()
    assert proc.returncode == 130, stderr
    assert f"operation {op_id} keeps running" in stderr and f"inboxd bulk cancel {op_id} --reason" in stderr
    assert (await get(admin, op_id)).state == RUNNING
    cancel = admin_pb2.CancelBulkOperationRequest(id=op_id, reason="test over")
    assert (await admin.CancelBulkOperation(cancel)).operation.state == CANCELLED
