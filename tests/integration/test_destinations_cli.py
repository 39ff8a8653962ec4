"""`inboxd destinations create|list|get|resume|delete` and `inboxd show`'s deliveries, run as real processes;
and the admin calls scoped to the caller's grants."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta

import grpc
import pytest

from inboxd.config.settings import Settings
from inboxd.config.tokens import Caller, Scope
from inboxd.domain.destinations import DestinationSpec
from inboxd.domain.errors import NotFound, PermissionDenied
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import NO_BULK_RUNNER, NO_RESCUER
from tests.integration.admin_fixtures import run_cli
from tests.integration.destination_endpoint import Endpoint, destinations_removed, endpoint
from tests.integration.helpers import accept_request, read_event
from tests.integration.procs import poll

__all__ = ["destinations_removed", "endpoint"]


@pytest.fixture(scope="module")
async def delivering(db: Database) -> AsyncIterator[RunningServer]:
    settings = Settings(
        listen="127.0.0.1:0",
        rescue_interval=NO_RESCUER,
        bulk_poll=NO_BULK_RUNNER,
        destinations_poll=timedelta(seconds=0.2),
        destinations_allow=("127.0.0.1/32",),
        destinations_allow_http=True,
    )
    running = await start_server(settings, db)
    yield running
    await running.stop(1.0)


async def test_an_operator_creates_a_destination_sees_its_deliveries_and_deletes_it(
    delivering: RunningServer, endpoint: Endpoint, db: Database, ns: str
) -> None:
    at = ["--target", f"127.0.0.1:{delivering.port}"]
    name = f"cli-{ns[-12:]}"
    made = await run_cli(
        "destinations", "create", name, "--url", endpoint.url("ok"), "--namespaces", ns, "--post-timeout", "3s",
        "--reason", "billing has no worker", "--json", *at,
    )  # fmt: skip
    assert made.code == 0, made.stderr
    answer = json.loads(made.stdout)
    assert answer["secret"].startswith("whsec_") and "shown once" in made.stderr
    assert answer["destination"]["timeout"] == "3s"
    endpoint.secret = answer["secret"]

    async with grpc.aio.insecure_channel(f"127.0.0.1:{delivering.port}") as chan:
        await InboxServiceStub(chan).Accept(accept_request(ns, "evt-1"))

    async def completed() -> bool | None:
        return True if (await read_event(db, ns, "evt-1"))["state"] == "completed" else None

    await poll(completed, within=10.0)
    assert endpoint.received[0].verified

    listed = await run_cli("destinations", "list", *at)
    [line] = [line for line in listed.stdout.splitlines() if line.startswith(name)]
    assert ns in line and "active" in line

    got = await run_cli("destinations", "get", name, *at)
    assert got.code == 0, got.stderr
    assert "latest attempts (newest first)" in got.stdout and "completed" in got.stdout
    assert answer["secret"] not in got.stdout

    shown = await run_cli("show", ns, "evt-1", *at)
    deliveries = shown.stdout.split("deliveries (destinations' POSTs)", 1)[1]
    assert name in deliveries and " 200 " in deliveries and "completed" in deliveries

    resumed = await run_cli("destinations", "resume", name, "--reason", "checking", *at)
    assert resumed.stdout.strip() == f"resumed {name}: active"
    deleted = await run_cli("destinations", "delete", name, "--reason", "moved to a worker", *at)
    assert deleted.code == 0 and deleted.stdout.strip() == f"deleted {name}"
    gone = await run_cli("destinations", "get", name, *at)
    assert gone.code == 1 and "NOT_FOUND" in gone.stderr


async def test_a_token_manages_only_destinations_within_its_grants(delivering: RunningServer, ns: str) -> None:
    assert delivering.ops is not None
    operators = delivering.ops.operators
    team_a = Caller("team-a", frozenset({Scope.ADMIN}), (f"{ns}/a/*",))
    everyone = Caller("root", frozenset({Scope.ADMIN}), ("*",))
    spec = DestinationSpec(f"scoped-{ns[-12:]}", "https://hooks.example.com/in", f"{ns}/b/*", "")

    with pytest.raises(PermissionDenied, match="not granted namespace_pattern"):
        await operators.create_destination(spec, reason="r", caller=team_a)
    await operators.create_destination(spec, reason="r", caller=everyone)
    assert spec.name not in {d.name for d in await operators.list_destinations(caller=team_a)}
    with pytest.raises(NotFound):
        await operators.get_destination(spec.name, caller=team_a)
    with pytest.raises(NotFound):
        await operators.delete_destination(spec.name, reason="r", caller=team_a)
    await operators.delete_destination(spec.name, reason="r", caller=everyone)
