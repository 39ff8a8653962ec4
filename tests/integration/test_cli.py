"""The operator's subcommands of `inboxd`, run as a real process against a real server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from inboxd.config.settings import Settings
from inboxd.config.tokens import TokenRegistry
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd_client.v1 import admin_pb2, types_pb2
from inboxd_client.v1.admin_pb2_grpc import InboxAdminServiceStub
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import NO_RESCUER
from tests.integration.admin_fixtures import clocked_admin, completed_event, dead_lettered_event, run_cli
from tests.integration.certs import make_certs
from tests.integration.helpers import accept_request
from tests.integration.test_auth import write_tokens

__all__ = ["clocked_admin"]  # the fixture, imported so pytest finds it


@pytest.fixture
def target(clocked_server: RunningServer) -> str:
    return f"127.0.0.1:{clocked_server.port}"


async def test_stats_prints_a_table_and_json(work: InboxServiceStub, ns: str, target: str) -> None:
    await dead_lettered_event(work, ns, "dead")
    await work.Accept(accept_request(ns, "waiting"))
    table = await run_cli("stats", "--target", target, "--namespace", ns)
    assert table.code == 0, table.stderr
    header, row = table.stdout.splitlines()
    assert header.split()[:5] == ["NAMESPACE", "PENDING", "PROCESSING", "COMPLETED", "DEAD"]
    assert row.split()[:5] == [ns, "1", "0", "0", "1"]
    as_json = await run_cli("stats", "--target", target, "--namespace", ns, "--json")
    [stats] = json.loads(as_json.stdout)["namespaces"]
    assert (stats["namespace"], stats["pending"], stats["dead_lettered"]) == (ns, "1", "1")


async def test_events_lists_newest_first_and_resumes_from_its_page_token(
    work: InboxServiceStub, ns: str, target: str
) -> None:
    for key in ("a", "b", "c"):
        await work.Accept(accept_request(ns, key, {"secret": "payload-marker"}))
    first = await run_cli("events", "--target", target, "--namespace", ns, "--limit", "2", "--json")
    assert first.code == 0, first.stderr
    page = json.loads(first.stdout)
    assert [e["event_key"] for e in page["events"]] == ["c", "b"]
    assert all(e["state"] == "EVENT_STATE_PENDING" for e in page["events"])
    assert "payload-marker" not in first.stdout
    rest = await run_cli(
        "events", "--target", target, "-n", ns, "--state", "pending", "--page-token", page["next_page_token"]
    )
    assert rest.code == 0, rest.stderr
    lines = rest.stdout.splitlines()
    assert lines[0].split()[:4] == ["NAMESPACE", "KEY", "TYPE", "STATE"]
    assert [line.split()[1] for line in lines[1:]] == ["a"]


async def test_show_prints_the_whole_record_with_its_payload(work: InboxServiceStub, ns: str, target: str) -> None:
    await completed_event(work, ns, "k", {"order": 42})
    shown = await run_cli("show", ns, "k", "--target", target)
    assert shown.code == 0, shown.stderr
    assert "COMPLETED" in shown.stdout
    assert '"order": 42' in shown.stdout
    assert "completed" in shown.stdout.split("claims", 1)[1]  # the claim's outcome
    as_json = json.loads((await run_cli("show", ns, "k", "--target", target, "--json")).stdout)
    assert as_json["summary"]["state"] == "EVENT_STATE_COMPLETED"
    assert as_json["payload"] == {"order": 42}
    missing = await run_cli("show", ns, "ghost", "--target", target)
    assert missing.code == 1
    assert "NOT_FOUND" in missing.stderr


async def test_dead_letters_lists_each_with_its_last_error(work: InboxServiceStub, ns: str, target: str) -> None:
    await dead_lettered_event(work, ns, "one", error="schema v3 unknown")
    await completed_event(work, ns, "fine")
    listed = await run_cli("dead-letters", "--target", target, "--namespace", ns)
    assert listed.code == 0, listed.stderr
    header, row = listed.stdout.splitlines()
    assert "LAST ERROR" in header
    assert row.split()[:2] == [ns, "one"]
    assert row.endswith("schema v3 unknown")


async def test_replay_of_all_dead_letters_reports_progress_and_returns_them_to_pending(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, ns: str, target: str
) -> None:
    for key in ("d1", "d2", "d3"):
        await dead_lettered_event(work, ns, key)
    await completed_event(work, ns, "fine")
    dry = await run_cli("replay", "--target", target, "-n", ns, "--dead-letters", "--reason", "x", "--dry-run")
    assert sorted(dry.stdout.split()) == ["d1", "d2", "d3"]
    listing = await clocked_admin.ListEvents(
        admin_pb2.ListEventsRequest(namespace=ns, state=types_pb2.EVENT_STATE_PENDING)
    )
    assert list(listing.events) == []  # the dry run changed nothing

    done = await run_cli("replay", "--target", target, "-n", ns, "--dead-letters", "--reason", "fixed the parser")
    assert done.code == 0, done.stderr
    progress = [line for line in done.stderr.splitlines() if line.startswith("replayed ")]
    assert [line.split()[1] for line in progress] == ["1/3", "2/3", "3/3"]
    assert "replayed 3 of 3" in done.stdout
    for key in ("d1", "d2", "d3"):
        event = (await clocked_admin.GetEvent(admin_pb2.GetEventRequest(namespace=ns, event_key=key))).event
        assert event.summary.state == types_pb2.EVENT_STATE_PENDING
        assert [(r.actor, r.reason) for r in event.replays] == [("anonymous", "fixed the parser")]
    fine = (await clocked_admin.GetEvent(admin_pb2.GetEventRequest(namespace=ns, event_key="fine"))).event
    assert fine.summary.state == types_pb2.EVENT_STATE_COMPLETED


async def test_replay_reports_each_refusal_and_exits_nonzero(work: InboxServiceStub, ns: str, target: str) -> None:
    await dead_lettered_event(work, ns, "dead")
    await work.Accept(accept_request(ns, "live"))
    answer = await run_cli(
        "replay", "--target", target, "-n", ns, "--key", "live", "--key", "dead", "--reason", "r", "--json"
    )
    assert answer.code == 1
    report = json.loads(answer.stdout)
    assert report["replayed"] == ["dead"]
    assert [f["event_key"] for f in report["failed"]] == ["live"]
    assert "FAILED_PRECONDITION" in report["failed"][0]["error"]
    no_reason = await run_cli("replay", "--target", target, "-n", ns, "--key", "dead")
    assert no_reason.code == 2
    assert "--reason" in no_reason.stderr


@pytest.fixture(scope="module")
async def tls_server(
    db: Database, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[RunningServer, Path, str]]:
    """A server with TLS and bearer tokens: (server, CA file, root token)."""
    folder = tmp_path_factory.mktemp("cli-tls")
    certs = make_certs(folder)
    tokens = write_tokens(folder / "tokens.toml")
    settings = Settings(
        listen="127.0.0.1:0",
        tokens_file=tokens.file,
        tls_cert=certs.server_cert,
        tls_key=certs.server_key,
        rescue_interval=NO_RESCUER,
    )
    running = await start_server(settings, db, registry=TokenRegistry(tokens.file))
    yield running, certs.ca, tokens.root
    await running.stop(1.0)


async def test_the_cli_sends_its_token_over_tls(tls_server: tuple[RunningServer, Path, str], ns: str) -> None:
    running, ca, token = tls_server
    target = f"localhost:{running.port}"
    refused = await run_cli("stats", "--target", target, "--tls-ca", str(ca))
    assert refused.code == 1
    assert "UNAUTHENTICATED" in refused.stderr
    allowed = await run_cli(
        "stats", "--target", target, "--json", env={"INBOXD_TLS_CA": str(ca), "INBOXD_TOKEN": token}
    )
    assert allowed.code == 0, allowed.stderr
    assert "namespaces" in json.loads(allowed.stdout) or json.loads(allowed.stdout) == {}
