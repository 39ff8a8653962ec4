"""SetFlowControl, GetFlowControl and ListFlowControls: checked, audited, within the grants, and they wake Claims.

Every rule a test sets lies under its own namespace (the suite shares one
database, and a rule binds every Claim of what it governs), and the rules
are removed after each test.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest

from inboxd.config.settings import Settings
from inboxd.config.tokens import Scope, TokenRegistry, entry_toml, new_token
from inboxd.domain.vocabulary import EventKey, Namespace, NewEvent
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.accepts import accept_events
from inboxd.store.database import Database
from inboxd.store.notifications import ReplicaSignals
from inboxd_client.v1 import admin_pb2, inbox_pb2
from inboxd_client.v1.admin_pb2_grpc import InboxAdminServiceStub
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import NO_RESCUER
from tests.harness import eventually
from tests.integration.helpers import accept_request, expect_status, seconds
from tests.integration.test_claims import claim_one

INVALID = grpc.StatusCode.INVALID_ARGUMENT
DENIED = grpc.StatusCode.PERMISSION_DENIED
# The grants of the restricted token: a prefix no other test's namespace shares.
MAILERA = f"mailera-{uuid.uuid4().hex[:8]}"


def rule_request(pattern: str, reason: str = "tenant import", **fields: Any) -> admin_pb2.SetFlowControlRequest:
    return admin_pb2.SetFlowControlRequest(pattern=pattern, reason=reason, **fields)


async def remove_rules(db: Database, prefix: str) -> None:
    async def work(conn: Any) -> None:
        await conn.execute("DELETE FROM inbox_flow_rules WHERE starts_with(pattern, %s)", (prefix,))

    await db.run(work)


@pytest.fixture(autouse=True)
async def own_rules_removed(db: Database, ns: str) -> AsyncIterator[None]:
    yield
    await remove_rules(db, ns)
    await remove_rules(db, MAILERA)


@pytest.fixture(scope="module")
def restricted_token(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    token = new_token()
    path = tmp_path_factory.mktemp("flow-tokens") / "tokens.toml"
    path.write_text(entry_toml("mailera-ops", token, [Scope.ADMIN], [f"{MAILERA}/*"]))
    return token, path


@pytest.fixture(scope="module")
async def restricted_admin(db: Database, restricted_token: tuple[str, Path]) -> AsyncIterator[Any]:
    token, path = restricted_token
    settings = Settings(listen="127.0.0.1:0", tokens_file=path, rescue_interval=NO_RESCUER)
    running = await start_server(settings, db, registry=TokenRegistry(path))
    interceptor_md = [("authorization", f"Bearer {token}")]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as chan:
        yield _WithMetadata(InboxAdminServiceStub(chan), interceptor_md)
    await running.stop(1.0)


class _WithMetadata:
    """An admin stub whose every call carries the token."""

    def __init__(self, stub: InboxAdminServiceStub, metadata: list[tuple[str, str]]) -> None:
        self._stub = stub
        self._metadata = metadata

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._stub, name)
        return lambda request: method(request, metadata=self._metadata)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"pattern": ""}, "pattern"),
        ({"pattern": "x" * 513}, "pattern"),
        ({"pattern": "a\x00b"}, "pattern"),
        ({"max_in_flight": 1_000_001}, "max_in_flight"),
        ({"rate": float("nan")}, "rate"),
        ({"rate": float("inf")}, "rate"),
        ({"rate": -2.0}, "rate"),
        ({"burst": 1_000_001}, "burst"),
        ({"weight": 1001}, "weight"),
        ({"paused": False, "resume_ramp": seconds(0.5)}, "resume_ramp"),
        ({"paused": False, "resume_ramp": seconds(25 * 3600)}, "resume_ramp"),
        ({"resume_ramp": seconds(60)}, "resume_ramp"),
        ({"ramp_rate": 5.0}, "ramp_rate"),
        ({"remove": True, "max_in_flight": 3}, "remove"),
        ({"reason": ""}, "reason"),
    ],
)
async def test_set_flow_control_refuses_each_bad_field_by_name(
    admin: InboxAdminServiceStub, ns: str, fields: dict[str, Any], field: str
) -> None:
    request = {"pattern": ns, "reason": "why", **fields}
    error = await expect_status(admin.SetFlowControl(admin_pb2.SetFlowControlRequest(**request)), INVALID)
    assert (error.details() or "").startswith(f"{field}:"), error.details()


async def test_a_ramp_without_a_rate_or_on_a_rule_not_paused_is_refused(admin: InboxAdminServiceStub, ns: str) -> None:
    ramp = {"paused": False, "resume_ramp": seconds(60)}
    not_paused = await expect_status(
        admin.SetFlowControl(rule_request(ns, **ramp)), grpc.StatusCode.FAILED_PRECONDITION
    )
    assert "is not paused" in (not_paused.details() or "")
    await admin.SetFlowControl(rule_request(ns, paused=True))
    no_rate = await expect_status(admin.SetFlowControl(rule_request(ns, **ramp)), INVALID)
    assert no_rate.details() == "ramp_rate: a ramp climbs to a rate: set ramp_rate or rate"
    answer = await admin.SetFlowControl(rule_request(ns, **ramp, ramp_rate=100.0))
    assert answer.before.paused and not answer.after.paused
    assert (answer.after.ramp.ToTimedelta(), answer.after.ramp_rate) == (timedelta(seconds=60), 100.0)
    assert answer.after.resumed_at == answer.after.updated_at


async def test_each_change_is_audited_with_who_when_before_and_after(admin: InboxAdminServiceStub, ns: str) -> None:
    created = await admin.SetFlowControl(rule_request(ns, max_in_flight=5, rate=50.0, burst=10, reason="import"))
    assert not created.HasField("before")
    assert (created.after.max_in_flight, created.after.rate, created.after.burst) == (5, 50.0, 10)
    assert (created.after.weight, created.after.updated_by) == (1, "anonymous")
    changed = await admin.SetFlowControl(rule_request(ns, weight=2, paused=True, max_in_flight=0, reason="outage"))
    assert changed.before == created.after
    assert (changed.after.max_in_flight, changed.after.rate, changed.after.weight, changed.after.paused) == (
        0, 50.0, 2, True
    )  # fmt: skip
    removed = await admin.SetFlowControl(rule_request(ns, remove=True, reason="done"))
    assert removed.before == changed.after and not removed.HasField("after")
    await expect_status(admin.SetFlowControl(rule_request(ns, remove=True)), grpc.StatusCode.NOT_FOUND)

    await admin.SetFlowControl(rule_request(ns, reason="again"))
    answer = await admin.GetFlowControl(admin_pb2.GetFlowControlRequest(namespace=ns))
    words = [(c.actor, c.reason, c.before, c.after) for c in answer.changes]
    assert words == [
        ("anonymous", "again", "none", "no limits"),
        ("anonymous", "done", "rate 50/s burst 10, weight 2, paused", "none"),
        ("anonymous", "outage", "max_in_flight 5, rate 50/s burst 10", "rate 50/s burst 10, weight 2, paused"),
        ("anonymous", "import", "none", "max_in_flight 5, rate 50/s burst 10"),
    ]
    assert all(c.pattern == ns for c in answer.changes)
    when = [c.changed_at.ToDatetime() for c in answer.changes]
    assert when == sorted(when, reverse=True)
    # When: each change's audit row carries the instant the rule it wrote was stamped with.
    assert answer.changes[3].changed_at == created.after.updated_at
    assert answer.changes[2].changed_at == changed.after.updated_at


async def test_the_most_specific_rule_governs_and_its_figures_count_what_it_governs(
    admin: InboxAdminServiceStub, inbox: InboxServiceStub, ns: str
) -> None:
    await admin.SetFlowControl(rule_request(f"{ns}/*", max_in_flight=100))
    await admin.SetFlowControl(rule_request(f"{ns}/a*", weight=2))
    await admin.SetFlowControl(rule_request(f"{ns}/ab", rate=10.0))
    for namespace, events in ((f"{ns}/x", 3), (f"{ns}/y", 1), (f"{ns}/abc", 2), (f"{ns}/ab", 1)):
        for i in range(events):
            await inbox.Accept(accept_request(namespace, f"k{i}"))
    await claim_one(inbox, f"{ns}/x")

    async def get(name: str) -> admin_pb2.GetFlowControlResponse:
        answer: admin_pb2.GetFlowControlResponse = await admin.GetFlowControl(
            admin_pb2.GetFlowControlRequest(namespace=name)
        )
        return answer

    x = await get(f"{ns}/x")
    assert x.control.rule.pattern == f"{ns}/*"
    assert (x.in_flight, x.pending) == (1, 2)
    assert (x.control.namespaces, x.control.in_flight, x.control.pending) == (1, 1, 2)
    assert (await get(f"{ns}/abc")).control.rule.pattern == f"{ns}/a*"
    own = await get(f"{ns}/ab")
    assert (own.control.rule.pattern, own.control.rule.rate, own.pending) == (f"{ns}/ab", 10.0, 1)
    assert [c.after for c in own.changes] == ["rate 10/s"]
    nothing = await get(f"other-{ns}")
    assert not nothing.HasField("control") and not nothing.changes
    # A pattern by its exact name: its figures over the namespaces it governs ({ns}/ab and {ns}/abc have their own).
    star = await get(f"{ns}/*")
    assert (star.control.namespaces, star.control.in_flight, star.control.pending) == (2, 1, 3)
    await expect_status(
        admin.GetFlowControl(admin_pb2.GetFlowControlRequest(namespace=f"{ns}/zz*")), grpc.StatusCode.NOT_FOUND
    )

    listed = (await admin.ListFlowControls(admin_pb2.ListFlowControlsRequest())).controls
    mine = [c for c in listed if c.rule.pattern.startswith(ns)]
    assert [c.rule.pattern for c in mine] == [f"{ns}/ab", f"{ns}/a*", f"{ns}/*"]
    assert [(c.namespaces, c.in_flight, c.pending) for c in mine] == [(1, 0, 1), (1, 0, 2), (2, 1, 3)]


async def test_a_token_sets_and_sees_only_rules_within_its_grants(
    restricted_admin: Any, admin: InboxAdminServiceStub, ns: str
) -> None:
    await restricted_admin.SetFlowControl(rule_request(f"{MAILERA}/acme", max_in_flight=5))
    await restricted_admin.SetFlowControl(rule_request(f"{MAILERA}/a*", paused=True))
    for outside in (f"billing-{ns}/x", "*", f"{MAILERA}*", f"{ns}/*"):
        error = await expect_status(restricted_admin.SetFlowControl(rule_request(outside, paused=True)), DENIED)
        assert repr(outside) in (error.details() or "")
        await expect_status(restricted_admin.GetFlowControl(admin_pb2.GetFlowControlRequest(namespace=outside)), DENIED)
    await admin.SetFlowControl(rule_request(f"{ns}/hidden", paused=True))
    seen = [
        c.rule.pattern for c in (await restricted_admin.ListFlowControls(admin_pb2.ListFlowControlsRequest())).controls
    ]
    assert seen == [f"{MAILERA}/acme", f"{MAILERA}/a*"]
    got = await restricted_admin.GetFlowControl(admin_pb2.GetFlowControlRequest(namespace=f"{MAILERA}/abc"))
    assert (got.control.rule.pattern, got.control.rule.paused, got.changes[0].actor) == (
        f"{MAILERA}/a*", True, "mailera-ops"
    )  # fmt: skip


async def test_stats_say_a_namespace_is_paused_and_name_its_rule(
    admin: InboxAdminServiceStub, inbox: InboxServiceStub, ns: str
) -> None:
    await inbox.Accept(accept_request(f"{ns}/a", "k"))
    await inbox.Accept(accept_request(f"{ns}/b", "k"))
    await admin.SetFlowControl(rule_request(f"{ns}/*", paused=True))
    await admin.SetFlowControl(rule_request(f"{ns}/b", max_in_flight=3))
    [a] = (await admin.Stats(admin_pb2.StatsRequest(namespace=f"{ns}/a"))).namespaces
    [b] = (await admin.Stats(admin_pb2.StatsRequest(namespace=f"{ns}/b"))).namespaces
    assert (a.paused, a.flow_rule) == (True, f"{ns}/*")
    assert (b.paused, b.flow_rule) == (False, f"{ns}/b")
    await admin.SetFlowControl(rule_request(f"{ns}/*", remove=True))
    [a] = (await admin.Stats(admin_pb2.StatsRequest(namespace=f"{ns}/a"))).namespaces
    assert (a.paused, a.flow_rule) == (False, "")


@pytest.fixture(scope="module")
async def quiet_admin(quiet_server: RunningServer) -> AsyncIterator[tuple[InboxServiceStub, InboxAdminServiceStub]]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{quiet_server.port}") as chan:
        yield InboxServiceStub(chan), InboxAdminServiceStub(chan)


async def test_a_loosened_rule_wakes_a_waiting_claim(
    quiet_server: RunningServer, quiet_admin: tuple[InboxServiceStub, InboxAdminServiceStub], db: Database, ns: str
) -> None:
    work, admin = quiet_admin
    await admin.SetFlowControl(rule_request(ns, max_in_flight=1))
    call = work.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], wait=seconds(20)), timeout=30)
    await eventually(lambda: len(quiet_server.inbox.bus) > 0, "the claim to wait")
    # Stored without a wake-up (as an event a rule held back would sit): only the rule's change can wake the Claim.
    await accept_events(db, [NewEvent(Namespace(ns), EventKey("held"), "test.event", b"{}")])
    await admin.SetFlowControl(rule_request(ns, max_in_flight=0, reason="limit lifted"))
    answer = await asyncio.wait_for(call, 10)
    assert [e.event_key for e in answer.events] == ["held"]


async def test_a_loosened_rule_tells_the_other_replicas_to_look_again(migrated_url: str) -> None:
    heard: list[list[tuple[str, str, int]] | None] = []
    listener = ReplicaSignals(migrated_url, heard.append)
    sender = ReplicaSignals(migrated_url, lambda _: None)
    listener.start()
    sender.start(listen=False)
    try:
        await eventually(lambda: None in heard, "the listener to start")
        heard.clear()
        sender.publish_look_again()
        await eventually(lambda: None in heard, "the other replica to hear 'look again'")
    finally:
        await sender.stop()
        await listener.stop()


async def test_concurrent_creations_of_one_rule_take_turns_and_both_are_audited(
    admin: InboxAdminServiceStub, ns: str
) -> None:
    answers = await asyncio.gather(
        *(admin.SetFlowControl(rule_request(ns, weight=w, reason=f"weight {w}")) for w in range(2, 10))
    )
    # One created it; each other found the rule the one before it wrote, as its `before`.
    assert sum(not a.HasField("before") for a in answers) == 1
    history = (await admin.GetFlowControl(admin_pb2.GetFlowControlRequest(namespace=ns))).changes
    assert len(history) == 8 and history[-1].before == "none"
    assert all(newer.before == older.after for newer, older in itertools.pairwise(history))
