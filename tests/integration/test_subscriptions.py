"""Subscriptions on a real server and PostgreSQL: fan-out in the Accept's own transaction, each copy its own event.

The suite shares one database and a subscription binds every Accept into
what its pattern matches, so each test's subscriptions match only its own
namespace (the `ns` fixture) and are deleted after it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from inboxd.config.settings import Settings
from inboxd.config.tokens import Scope, TokenRegistry, entry_toml, new_token
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd_client.v1 import admin_pb2, inbox_pb2, types_pb2
from inboxd_client.v1.admin_pb2_grpc import InboxAdminServiceStub
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import NO_BULK_RUNNER, NO_RESCUER
from tests.integration.admin_fixtures import run_cli
from tests.integration.helpers import accept_request, expect_status, seconds
from tests.integration.test_claims import claim_one, fenced
from tests.integration.test_flow_control import remove_rules

ACCEPTED = inbox_pb2.ACCEPT_OUTCOME_ACCEPTED
DUPLICATE = inbox_pb2.ACCEPT_OUTCOME_DUPLICATE
CONFLICT = inbox_pb2.ACCEPT_OUTCOME_CONFLICT


@pytest.fixture
def tag() -> str:
    """A prefix of this test's own subscriber names."""
    return f"sub{uuid.uuid4().hex[:10]}"


@pytest.fixture(autouse=True)
async def own_subscriptions_removed(db: Database, tag: str) -> AsyncIterator[None]:
    yield

    async def work(conn: Any) -> None:
        await conn.execute("DELETE FROM inbox_subscriptions WHERE strpos(name, %s) > 0", (tag,))

    await db.run(work)


async def subscribe(admin: Any, name: str, pattern: str, *types: str) -> admin_pb2.CreateSubscriptionResponse:
    request = admin_pb2.CreateSubscriptionRequest(
        name=name, namespace_pattern=pattern, event_types=list(types), reason="billing needs every event"
    )
    answer: admin_pb2.CreateSubscriptionResponse = await admin.CreateSubscription(request)
    return answer


async def rows_of_key(db: Database, key: str, ns: str) -> dict[str, tuple[Any, ...]]:
    """Every stored event with this key in a namespace naming this test's `ns` (copies too), by namespace.

    (state, payload, metadata, ...). Only this test's: others accept keys such as "after" too.
    """

    async def work(conn: Any) -> dict[str, tuple[Any, ...]]:
        cur = await conn.execute(
            "SELECT namespace, state, raw_payload, metadata, ordering_key, revision, content_type, traceparent"
            " FROM inbox_events WHERE event_key = %s AND position(%s in namespace) > 0",
            (key, ns),
        )
        return {row[0]: tuple(row[1:]) for row in await cur.fetchall()}

    found: dict[str, tuple[Any, ...]] = await db.run(work)
    return found


async def test_one_delivery_fans_out_to_three_subscribers_and_its_redelivery_is_duplicate_for_all(
    inbox: InboxServiceStub, admin: InboxAdminServiceStub, db: Database, ns: str, tag: str
) -> None:
    names = [f"{tag}-billing", f"{tag}-audit", f"{tag}-search"]
    for name in names:
        await subscribe(admin, name, f"{ns}/*")
    origin = f"{ns}/stripe"
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    request = accept_request(
        origin,
        "evt_1",
        {"amount": 5},
        metadata={"delivery": "d1"},
        ordering_key="cus_1",
        revision=7,
        trace_context=types_pb2.TraceContext(traceparent=traceparent),
    )
    assert (await inbox.Accept(request)).outcome == ACCEPTED

    rows = await rows_of_key(db, "evt_1", ns)
    expected = {origin, *(f"{name}/{origin}" for name in names)}
    assert set(rows) == expected
    first = rows[origin]
    assert first[0] == "pending"
    for namespace in expected:
        assert rows[namespace] == first, namespace  # state, payload, metadata, ordering key, revision, type, trace

    # The provider redelivers (another delivery id): DUPLICATE, and no copy is made again.
    again = accept_request(origin, "evt_1", {"amount": 5}, metadata={"delivery": "d2"})
    assert (await inbox.Accept(again)).outcome == DUPLICATE
    batch = await inbox.AcceptBatch(inbox_pb2.AcceptBatchRequest(events=[again]))
    assert [r.outcome for r in batch.results] == [DUPLICATE]
    assert set(await rows_of_key(db, "evt_1", ns)) == expected  # four rows: one each, no more


async def test_accept_batch_and_stream_fan_out_each_new_event(
    inbox: InboxServiceStub, admin: InboxAdminServiceStub, db: Database, ns: str, tag: str
) -> None:
    await subscribe(admin, f"{tag}-a", ns)
    await subscribe(admin, f"{tag}-b", ns, "invoice.paid")  # only this type
    keys = [f"k{uuid.uuid4().hex[:8]}" for _ in range(3)]
    batch = inbox_pb2.AcceptBatchRequest(
        events=[
            accept_request(ns, keys[0], event_type="invoice.paid"),
            accept_request(ns, keys[1], event_type="invoice.created"),
        ]
    )
    assert [r.outcome for r in (await inbox.AcceptBatch(batch)).results] == [ACCEPTED, ACCEPTED]
    assert set(await rows_of_key(db, keys[0], ns)) == {ns, f"{tag}-a/{ns}", f"{tag}-b/{ns}"}
    assert set(await rows_of_key(db, keys[1], ns)) == {ns, f"{tag}-a/{ns}"}

    call = inbox.AcceptStream()
    await call.write(inbox_pb2.AcceptStreamRequest(sequence=1, accept=accept_request(ns, keys[2])))
    answer = await call.read()
    await call.done_writing()
    assert answer.accepted.outcome == ACCEPTED
    assert set(await rows_of_key(db, keys[2], ns)) == {ns, f"{tag}-a/{ns}"}


async def test_a_conflict_keeps_every_original_and_records_the_copy_on_each(
    inbox: InboxServiceStub, admin: InboxAdminServiceStub, db: Database, ns: str, tag: str
) -> None:
    names = [f"{tag}-x", f"{tag}-y"]
    for name in names:
        await subscribe(admin, name, ns)
    await inbox.Accept(accept_request(ns, "evt_c", {"amount": 1}))
    before = await rows_of_key(db, "evt_c", ns)

    assert (await inbox.Accept(accept_request(ns, "evt_c", {"amount": 999}))).outcome == CONFLICT

    assert await rows_of_key(db, "evt_c", ns) == before  # nothing overwritten, no copy made again
    for namespace in [ns, *(f"{name}/{ns}" for name in names)]:
        asked = admin_pb2.GetEventRequest(namespace=namespace, event_key="evt_c", include_conflict_payloads=True)
        record = (await admin.GetEvent(asked)).event
        assert json.loads(record.payload) == {"amount": 1}, namespace
        assert [json.loads(c.payload) for c in record.conflicts] == [{"amount": 999}], namespace


async def test_each_copy_is_claimed_and_completed_alone_and_a_copys_replay_leaves_the_others_alone(
    inbox: InboxServiceStub, admin: InboxAdminServiceStub, ns: str, tag: str
) -> None:
    names = [f"{tag}-1", f"{tag}-2", f"{tag}-3"]
    for name in names:
        await subscribe(admin, name, ns)
    await inbox.Accept(accept_request(ns, "evt_r"))
    copies = [f"{name}/{ns}" for name in names]

    # Each copy has its own claim (its own token and fencing token), and its own outcome.
    claimed = [await claim_one(inbox, namespace) for namespace in copies]
    assert len({c.claim_token for c in claimed}) == 3
    assert len({c.fencing_token for c in claimed}) == 3
    await inbox.Complete(inbox_pb2.CompleteRequest(**fenced(claimed[0])))
    await inbox.Fail(inbox_pb2.FailRequest(**fenced(claimed[1]), error="search index down", permanent=True))
    # One copy's token fences no other: the third copy's token cannot complete the first's event.
    stolen = {**fenced(claimed[2]), "namespace": copies[0]}
    await expect_status(inbox.Complete(inbox_pb2.CompleteRequest(**stolen)), grpc.StatusCode.ABORTED)
    await inbox.Complete(inbox_pb2.CompleteRequest(**fenced(claimed[2])))

    async def state(namespace: str) -> int:
        answer = await admin.GetEvent(admin_pb2.GetEventRequest(namespace=namespace, event_key="evt_r"))
        return int(answer.event.summary.state)

    assert await state(ns) == types_pb2.EVENT_STATE_PENDING  # the original is untouched by its copies' work
    replayed = await admin.Replay(admin_pb2.ReplayRequest(namespace=copies[1], event_key="evt_r", reason="reindex"))
    assert replayed.event.summary.state == types_pb2.EVENT_STATE_PENDING
    assert await state(copies[0]) == types_pb2.EVENT_STATE_COMPLETED
    assert await state(copies[2]) == types_pb2.EVENT_STATE_COMPLETED
    assert (await claim_one(inbox, copies[1])).attempt == 1


async def test_a_waiting_claim_on_a_copys_namespace_is_woken_by_the_accept(
    quiet_server: RunningServer, admin: InboxAdminServiceStub, ns: str, tag: str
) -> None:
    await subscribe(admin, f"{tag}-w", ns)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{quiet_server.port}") as chan:
        stub = InboxServiceStub(chan)
        # The quiet server never polls on its own: only the accept's wake-up can answer this Claim.
        waiting = stub.Claim(inbox_pb2.ClaimRequest(namespaces=[f"{tag}-w/{ns}"], wait=seconds(20)))
        await stub.Accept(accept_request(ns, "evt_w"))
        answer = await waiting
    assert [e.namespace for e in answer.events] == [f"{tag}-w/{ns}"]


async def test_deleting_a_subscription_stops_the_copying_and_keeps_its_copies(
    inbox: InboxServiceStub, admin: InboxAdminServiceStub, db: Database, ns: str, tag: str
) -> None:
    await subscribe(admin, f"{tag}-d", ns)
    await inbox.Accept(accept_request(ns, "before"))
    removed = await admin.DeleteSubscription(admin_pb2.DeleteSubscriptionRequest(name=f"{tag}-d", reason="team gone"))
    assert removed.subscription.namespace_pattern == ns
    await inbox.Accept(accept_request(ns, "after"))
    assert set(await rows_of_key(db, "before", ns)) == {ns, f"{tag}-d/{ns}"}
    assert set(await rows_of_key(db, "after", ns)) == {ns}


async def test_subscription_crud_through_the_api_is_checked_and_audited(
    admin: InboxAdminServiceStub, db: Database, ns: str, tag: str
) -> None:
    name = f"{tag}-crud"
    created = await subscribe(admin, name, f"{ns}/*", "invoice.paid")
    assert created.created and created.subscription.created_by
    assert not (await subscribe(admin, name, f"{ns}/*", "invoice.paid")).created  # a retried create
    await expect_status(subscribe(admin, name, f"{ns}/other"), grpc.StatusCode.ALREADY_EXISTS)
    for bad in ("", "a*b", "trailing/", "x" * 129):
        error = await expect_status(subscribe(admin, bad, ns), grpc.StatusCode.INVALID_ARGUMENT)
        assert (error.details() or "").startswith("name:"), error.details()
    no_reason = admin_pb2.CreateSubscriptionRequest(name=f"{tag}-r", namespace_pattern=ns)
    await expect_status(admin.CreateSubscription(no_reason), grpc.StatusCode.INVALID_ARGUMENT)

    listed = await admin.ListSubscriptions(admin_pb2.ListSubscriptionsRequest())
    assert name in [s.name for s in listed.subscriptions]
    got = await admin.GetSubscription(admin_pb2.GetSubscriptionRequest(name=name))
    assert list(got.subscription.event_types) == ["invoice.paid"]
    assert [(c.before, c.after, c.reason) for c in got.changes] == [
        ("none", f"namespaces {ns}/*, invoice.paid", "billing needs every event")
    ]

    await expect_status(
        admin.DeleteSubscription(admin_pb2.DeleteSubscriptionRequest(name=name)), grpc.StatusCode.INVALID_ARGUMENT
    )
    await admin.DeleteSubscription(admin_pb2.DeleteSubscriptionRequest(name=name, reason="done"))
    await expect_status(admin.GetSubscription(admin_pb2.GetSubscriptionRequest(name=name)), grpc.StatusCode.NOT_FOUND)
    await expect_status(
        admin.DeleteSubscription(admin_pb2.DeleteSubscriptionRequest(name=name, reason="again")),
        grpc.StatusCode.NOT_FOUND,
    )

    async def audit(conn: Any) -> list[tuple[str, str, str, str]]:
        cur = await conn.execute(
            "SELECT actor, reason, before, after FROM inbox_subscription_changes WHERE name = %s ORDER BY id", (name,)
        )
        return list(await cur.fetchall())

    rows = await db.run(audit)
    assert [(r[1], r[2], r[3]) for r in rows] == [
        ("billing needs every event", "none", f"namespaces {ns}/*, invoice.paid"),
        ("done", f"namespaces {ns}/*, invoice.paid", "none"),
    ]
    assert all(r[0] for r in rows)  # the caller is named


@pytest.fixture
async def team_server(db: Database, tmp_path: Path, tag: str) -> AsyncIterator[tuple[RunningServer, str, str]]:
    """A server with a tokens file: an operator granted everything, and team-a granted `<tag>-team-a/*`."""
    operator, team_a = new_token(), new_token()
    path = tmp_path / "tokens.toml"
    path.write_text(
        entry_toml("operator", operator, [Scope.ADMIN, Scope.ACCEPT, Scope.WORK], ["*"])
        + entry_toml("team-a", team_a, [Scope.ADMIN, Scope.WORK], [f"{tag}-team-a/*"])
    )
    settings = Settings(listen="127.0.0.1:0", tokens_file=path, rescue_interval=NO_RESCUER, bulk_poll=NO_BULK_RUNNER)
    running = await start_server(settings, db, registry=TokenRegistry(path))
    yield running, operator, team_a
    await running.stop(1.0)


async def test_a_grant_of_team_a_sees_only_team_as_copies(
    team_server: tuple[RunningServer, str, str], ns: str, tag: str
) -> None:
    running, operator, team_a = team_server
    as_operator = [("authorization", f"Bearer {operator}")]
    as_team_a = [("authorization", f"Bearer {team_a}")]
    team_a_ns, team_b_ns = f"{tag}-team-a/{ns}", f"{tag}-team-b/{ns}"
    async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as chan:
        admin, inbox = InboxAdminServiceStub(chan), InboxServiceStub(chan)
        # team-a may not make a subscription whose copies land outside its grants, nor read the origin.
        request = admin_pb2.CreateSubscriptionRequest(name=f"{tag}-team-a", namespace_pattern=ns, reason="r")
        await expect_status(admin.CreateSubscription(request, metadata=as_team_a), grpc.StatusCode.PERMISSION_DENIED)
        for team in ("team-a", "team-b"):
            request = admin_pb2.CreateSubscriptionRequest(name=f"{tag}-{team}", namespace_pattern=ns, reason="r")
            await admin.CreateSubscription(request, metadata=as_operator)
        await inbox.Accept(accept_request(ns, "evt_g"), metadata=as_operator)

        listed = await admin.ListSubscriptions(admin_pb2.ListSubscriptionsRequest(), metadata=as_team_a)
        assert [s.name for s in listed.subscriptions] == []  # team-a is not granted the origin namespace
        answer = await inbox.Claim(inbox_pb2.ClaimRequest(max_events=100), metadata=as_team_a)
        assert [(e.namespace, e.event_key) for e in answer.events] == [(team_a_ns, "evt_g")]
        refused = inbox.Claim(inbox_pb2.ClaimRequest(namespaces=[team_b_ns]), metadata=as_team_a)
        await expect_status(refused, grpc.StatusCode.PERMISSION_DENIED)
        get_b = admin.GetEvent(admin_pb2.GetEventRequest(namespace=team_b_ns, event_key="evt_g"), metadata=as_team_a)
        await expect_status(get_b, grpc.StatusCode.PERMISSION_DENIED)


async def test_subscriptions_cli_creates_lists_gets_and_deletes(server: RunningServer, ns: str, tag: str) -> None:
    target = ["--target", f"127.0.0.1:{server.port}"]
    name = f"{tag}-cli"
    created = await run_cli(
        "subscriptions", "create", name, "--namespaces", f"{ns}/*", "--event-type", "a.b", "--reason", "r1", *target
    )
    assert created.code == 0, created.stderr
    assert created.stdout.startswith(f"created {name}: {ns}/* (a.b)"), created.stdout
    listed = await run_cli("subscriptions", "list", *target)
    assert listed.code == 0 and name in listed.stdout, listed.stderr
    got = await run_cli("subscriptions", "get", name, "--json", *target)
    assert got.code == 0, got.stderr
    assert json.loads(got.stdout)["subscription"]["namespace_pattern"] == f"{ns}/*"
    refused = await run_cli("subscriptions", "create", "a*b", "--namespaces", ns, "--reason", "r", *target)
    assert refused.code == 1 and "name:" in refused.stderr, refused
    deleted = await run_cli("subscriptions", "delete", name, "--reason", "r2", *target)
    assert deleted.code == 0 and "its copies stay" in deleted.stdout, deleted.stderr
    missing = await run_cli("subscriptions", "get", name, *target)
    assert missing.code == 1 and "NOT_FOUND" in missing.stderr, missing


async def test_a_subscription_made_behind_a_replicas_back_binds_its_next_accept(
    server: RunningServer, inbox: InboxServiceStub, admin: InboxAdminServiceStub, db: Database, ns: str, tag: str
) -> None:
    # This replica believes no subscription stands, and runs the lean accept statement.
    server.inbox.fan_out.look_again()
    assert not server.inbox.fan_out.fanned

    async def another_replica_subscribes(conn: Any) -> None:
        await conn.execute(
            "INSERT INTO inbox_subscriptions (name, namespace_pattern, like_pattern, created_at, created_by)"
            " VALUES (%s, %s, %s, now(), 'elsewhere')",
            (f"{tag}-late", ns, ns),
        )

    await db.run(another_replica_subscribes)
    assert (await inbox.Accept(accept_request(ns, "evt_l"))).outcome == ACCEPTED
    assert set(await rows_of_key(db, "evt_l", ns)) == {ns, f"{tag}-late/{ns}"}  # the lean statement refused; copied
    assert server.inbox.fan_out.fanned

    await admin.DeleteSubscription(admin_pb2.DeleteSubscriptionRequest(name=f"{tag}-late", reason="gone"))
    assert not server.inbox.fan_out.fanned  # back to the lean statement
    await inbox.Accept(accept_request(ns, "evt_m"))
    assert set(await rows_of_key(db, "evt_m", ns)) == {ns}


async def test_flow_rules_and_stats_see_copies_as_the_events_they_are(
    inbox: InboxServiceStub, admin: InboxAdminServiceStub, db: Database, ns: str, tag: str
) -> None:
    name = f"{tag}-paced"
    copies = f"{name}/{ns}"
    await subscribe(admin, name, ns)
    pause = admin_pb2.SetFlowControlRequest(pattern=f"{name}/*", paused=True, reason="billing's API is down")
    await admin.SetFlowControl(pause)
    try:
        await inbox.Accept(accept_request(ns, "evt_f"))
        held = await inbox.Claim(inbox_pb2.ClaimRequest(namespaces=[copies], max_events=10))
        assert list(held.events) == []  # the subscriber's rule holds its copy back
        assert (await claim_one(inbox, ns)).event_key == "evt_f"  # and not the original
        stats = await admin.Stats(admin_pb2.StatsRequest(namespace=copies))
        [copy_stats] = stats.namespaces
        assert copy_stats.namespace == copies and copy_stats.pending == 1
    finally:
        await remove_rules(db, name)


async def test_a_subscription_never_copies_what_lies_under_its_own_name(
    inbox: InboxServiceStub, admin: InboxAdminServiceStub, db: Database, ns: str, tag: str
) -> None:
    # A pattern broad enough to match the subscriber's own namespaces: ns/* holds ns/<tag>-own/...
    name = f"{ns}/{tag}-own"
    await subscribe(admin, name, f"{ns}/*")
    await inbox.Accept(accept_request(f"{ns}/stripe", "evt_o"))
    await inbox.Accept(accept_request(f"{name}/direct", "evt_o"))  # accepted straight under the subscriber's name
    assert set(await rows_of_key(db, "evt_o", ns)) == {f"{ns}/stripe", f"{name}/{ns}/stripe", f"{name}/direct"}
