"""`inboxd settle`, `inboxd end-claim` and `inboxd discard`, run as a real process against a real server."""

from __future__ import annotations

import json
from typing import Any

import grpc

from inboxd.serving.server import RunningServer
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.integration.admin_fixtures import run_cli
from tests.integration.helpers import accept_request, expect_status, seconds
from tests.integration.test_auth import guarded, tokens
from tests.integration.test_claims import claim_one, fenced
from tests.integration.test_cli import target
from tests.integration.test_operator_actions import unknown_and_dead

__all__ = ["guarded", "target", "tokens"]  # fixtures, imported so pytest finds them


async def test_settle_records_the_outcome_and_show_prints_its_audit_row(
    work: InboxServiceStub, ns: str, target: str
) -> None:
    claim = await unknown_and_dead(work, ns)
    settle = [
        "settle", ns, "k", "send:v1", "--target", target, "--outcome", "succeeded", "--external-ref", "msg_7",
        "--expected-state", "unknown", "--expected-fencing-token", str(claim.fencing_token),
        "--reason", "delivered, says the provider",
    ]  # fmt: skip
    done = await run_cli(*settle)
    assert done.code == 0, done.stderr
    assert done.stdout.strip() == "settled send:v1 of k: SUCCEEDED (external ref msg_7)"
    shown = (await run_cli("show", ns, "k", "--target", target)).stdout
    acts = shown.split("operator actions", 1)[1]
    assert "settle_action" in acts and "delivered, says the provider" in acts


async def test_end_claim_returns_the_event_to_pending_and_refuses_another_claims_token(
    work: InboxServiceStub, ns: str, target: str
) -> None:
    await work.Accept(accept_request(ns, "k"))
    dead = await claim_one(work, ns, lease=seconds(3600))
    wrong = await run_cli(
        "end-claim", ns, "k", "--target", target, "--expected-fencing-token", str(dead.fencing_token + 1000),
        "--reason", "worker gone",
    )  # fmt: skip
    # Another claim's token: a view that moved on, refused, and the words say why.
    assert wrong.code == 1 and "FAILED_PRECONDITION" in wrong.stderr and "look again" in wrong.stderr
    done = await run_cli(
        "end-claim", ns, "k", "--target", target, "--expected-fencing-token", str(dead.fencing_token),
        "--count-attempt", "--reason", "worker gone",
    )  # fmt: skip
    assert done.code == 0, done.stderr
    assert done.stdout.strip() == f"ended claim {dead.fencing_token} of k: PENDING, attempt 1"
    await expect_status(work.Complete(inbox_pb2.CompleteRequest(**fenced(dead))), grpc.StatusCode.ABORTED)


async def test_events_shows_who_holds_a_processing_event_and_until_when(
    work: InboxServiceStub, ns: str, target: str
) -> None:
    await work.Accept(accept_request(ns, "k"))
    await claim_one(work, ns, lease=seconds(3600), worker_id="worker-3")
    listed = await run_cli("events", "--target", target, "-n", ns, "--state", "processing")
    assert listed.code == 0, listed.stderr
    header, row = listed.stdout.splitlines()
    assert "WORKER" in header and "LEASE EXPIRES" in header
    assert "worker-3" in row.split()


async def test_discard_completes_the_event_as_ignored(work: InboxServiceStub, ns: str, target: str) -> None:
    await work.Accept(accept_request(ns, "k"))
    done = await run_cli(
        "discard", ns, "k", "--target", target, "--expected-state", "pending", "--reason", "staging traffic", "--json"
    )
    assert done.code == 0, done.stderr
    event = json.loads(done.stdout)
    assert (event["summary"]["state"], event["disposition"], event["disposition_reason"]) == (
        "EVENT_STATE_COMPLETED",
        "DISPOSITION_IGNORED",
        "staging traffic",
    )


async def test_the_acting_commands_need_the_namespace_granted(guarded: RunningServer, tokens: Any, ns: str) -> None:
    theirs = f"tenant-b/{ns}"
    env = {"INBOXD_TOKEN": tokens.admin_a}  # granted tenant-a/* only
    denied = await run_cli(
        "discard", theirs, "k", "--target", f"127.0.0.1:{guarded.port}", "--expected-state", "pending",
        "--reason", "not mine", env=env,
    )  # fmt: skip
    assert denied.code == 1 and "PERMISSION_DENIED" in denied.stderr
