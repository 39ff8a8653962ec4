"""`inboxd flow show|set|pause|resume|remove` and `inboxd stats` on a paused namespace, run as real processes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from inboxd.serving.server import RunningServer
from inboxd.store.database import Database
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.integration.admin_fixtures import run_cli
from tests.integration.helpers import accept_request
from tests.integration.test_flow_control import remove_rules


@pytest.fixture
async def target(clocked_server: RunningServer, db: Database, ns: str) -> AsyncIterator[str]:
    yield f"127.0.0.1:{clocked_server.port}"
    await remove_rules(db, ns)


async def test_an_operator_pauses_a_tenant_sees_it_paused_and_resumes_it_with_a_ramp(
    work: InboxServiceStub, ns: str, target: str
) -> None:
    tenant = f"{ns}/acme"
    await work.Accept(accept_request(tenant, "k"))
    at = ["--target", target]

    made = await run_cli("flow", "set", f"{ns}/*", "--max-in-flight", "5", "--rate", "50", "--reason", "import", *at)
    assert made.code == 0, made.stderr
    assert made.stdout.strip() == f"set {ns}/*: none -> max_in_flight 5, rate 50/s"
    paused = await run_cli("flow", "pause", f"{ns}/*", "--reason", "provider down", *at)
    assert paused.stdout.strip() == f"pause {ns}/*: max_in_flight 5, rate 50/s -> max_in_flight 5, rate 50/s, paused"

    stats = await run_cli("stats", "--namespace", tenant, *at)
    header, row = stats.stdout.splitlines()
    assert "FLOW" in header.split()
    assert f"PAUSED ({ns}/*)" in row

    shown = await run_cli("flow", "show", tenant, *at)
    assert shown.code == 0, shown.stderr
    assert f"rule          {ns}/*: max_in_flight 5, rate 50/s, paused" in shown.stdout
    assert "in flight     0/5" in shown.stdout and "pending       1" in shown.stdout
    changes = shown.stdout.split("recent changes (newest first)", 1)[1]
    assert changes.index("provider down") < changes.index("import")

    resumed = await run_cli("flow", "resume", f"{ns}/*", "--ramp", "5m", "--ramp-rate", "100", "--reason", "back", *at)
    assert resumed.code == 0, resumed.stderr
    assert resumed.stdout.strip().endswith("-> max_in_flight 5, rate 50/s, ramp to 100/s over 5m")

    table = await run_cli("flow", "show", *at)
    [line] = [line for line in table.stdout.splitlines() if line.startswith(f"{ns}/*")]
    assert "ramping to 100/s" in line and "0 (5 each)" in line

    removed = await run_cli("flow", "remove", f"{ns}/*", "--reason", "done", "--json", *at)
    answer = json.loads(removed.stdout)
    assert answer["before"]["ramp"] == "300s" and "after" not in answer


async def test_a_refused_change_prints_the_servers_words_and_exits_non_zero(ns: str, target: str) -> None:
    too_heavy = await run_cli("flow", "set", ns, "--weight", "1001", "--reason", "x", "--target", target)
    assert too_heavy.code == 1
    assert "INVALID_ARGUMENT: weight: is 1001" in too_heavy.stderr
    absent = await run_cli("flow", "remove", ns, "--reason", "x", "--target", target)
    assert absent.code == 1 and f"NOT_FOUND: no flow-control rule for {ns!r} to remove" in absent.stderr
