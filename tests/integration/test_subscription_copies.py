"""A bulk operation COPY: a subscription created later copies the past only when asked, each copy once.

On a real server and PostgreSQL; the operation is carried on by a runner of
the test server's own (tests/integration/bulk_fixtures.py). Subscriptions
match only the test's own namespace and are deleted after it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from inboxd.serving.server import RunningServer
from inboxd.store.database import Database
from inboxd_client.v1 import admin_pb2, inbox_pb2
from inboxd_client.v1.admin_pb2_grpc import InboxAdminServiceStub
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.integration.admin_fixtures import run_cli
from tests.integration.bulk_fixtures import DONE, REPLAY, carry, get, start
from tests.integration.helpers import accept_request, expect_status
from tests.integration.test_claims import claim_one

COPY = admin_pb2.BULK_ACTION_COPY


@pytest.fixture
def name() -> str:
    return f"sub{uuid.uuid4().hex[:10]}"


@pytest.fixture(autouse=True)
async def own_subscription_removed(db: Database, name: str) -> AsyncIterator[None]:
    yield

    async def work(conn: Any) -> None:
        await conn.execute("DELETE FROM inbox_subscriptions WHERE name = %s", (name,))

    await db.run(work)


async def namespaces_of(db: Database, ns: str, name: str) -> dict[str, set[str]]:
    """The keys stored in the origin namespace and in the subscription's copy of it."""

    async def read(conn: Any) -> dict[str, set[str]]:
        cur = await conn.execute(
            "SELECT namespace, event_key FROM inbox_events WHERE namespace IN (%s, %s)", (ns, f"{name}/{ns}")
        )
        found: dict[str, set[str]] = {ns: set(), f"{name}/{ns}": set()}
        for namespace, key in await cur.fetchall():
            found[namespace].add(key)
        return found

    result: dict[str, set[str]] = await db.run(read)
    return result


async def test_copy_makes_a_later_subscriptions_copies_of_the_past_once_each(
    server: RunningServer, inbox: InboxServiceStub, admin: InboxAdminServiceStub, db: Database, ns: str, name: str
) -> None:
    keys = [f"old_{i}" for i in range(5)]
    for key in keys:
        await inbox.Accept(accept_request(ns, key))
    claimed = await claim_one(inbox, ns)  # one is PROCESSING: its copy is made all the same
    subscribe = admin_pb2.CreateSubscriptionRequest(name=name, namespace_pattern=ns, reason="late team")
    await admin.CreateSubscription(subscribe)
    assert (await namespaces_of(db, ns, name))[f"{name}/{ns}"] == set()  # the past is not copied by itself

    started = await start(admin, ns, COPY, subscription=name, reason="backfill the late team")
    assert started.operation.matched == 5 and started.operation.subscription == name
    # Two chunks of two, then the rest: the cursor carries it on where it stopped.
    assert server.ops is not None
    await server.ops.operators.run_bulk_chunk(uuid.UUID(started.operation.id), largest=2)
    await carry(server, started.operation.id)
    done = await get(admin, started.operation.id)
    assert (done.state, done.done, done.skipped) == (DONE, 5, 0)
    stored = await namespaces_of(db, ns, name)
    assert stored[f"{name}/{ns}"] == set(keys)
    copy = await claim_one(inbox, f"{name}/{ns}")  # a copy is claimable on its own, attempt 1
    assert copy.attempt == 1 and copy.namespace == f"{name}/{ns}"
    assert claimed.namespace == ns  # the original's claim is untouched

    # Again: every copy stands already, so each match is skipped and nothing is copied twice.
    again = await start(admin, ns, COPY, subscription=name, reason="again")
    await carry(server, again.operation.id)
    repeated = await get(admin, again.operation.id)
    assert (repeated.state, repeated.done, repeated.skipped) == (DONE, 0, 5)
    assert (await namespaces_of(db, ns, name))[f"{name}/{ns}"] == set(keys)


async def test_copy_is_refused_without_its_subscription_and_only_goes_with_copy(
    admin: InboxAdminServiceStub, ns: str, name: str
) -> None:
    error = await expect_status(start(admin, ns, COPY), grpc.StatusCode.INVALID_ARGUMENT)
    assert (error.details() or "").startswith("subscription:"), error.details()
    error = await expect_status(start(admin, ns, REPLAY, subscription=name), grpc.StatusCode.INVALID_ARGUMENT)
    assert (error.details() or "").startswith("subscription:"), error.details()
    await expect_status(start(admin, ns, COPY, subscription=name), grpc.StatusCode.NOT_FOUND)


async def test_a_copy_bulk_operation_follows_the_subscriptions_types(
    server: RunningServer, inbox: InboxServiceStub, admin: InboxAdminServiceStub, db: Database, ns: str, name: str
) -> None:
    await inbox.Accept(accept_request(ns, "paid", event_type="invoice.paid"))
    await inbox.Accept(accept_request(ns, "created", event_type="invoice.created"))
    subscribe = admin_pb2.CreateSubscriptionRequest(
        name=name, namespace_pattern=ns, event_types=["invoice.paid"], reason="paid only"
    )
    await admin.CreateSubscription(subscribe)
    started = await start(admin, ns, COPY, subscription=name)
    await carry(server, started.operation.id)
    done = await get(admin, started.operation.id)
    assert (done.done, done.skipped) == (1, 1)
    assert (await namespaces_of(db, ns, name))[f"{name}/{ns}"] == {"paid"}
    answer = await inbox.Claim(inbox_pb2.ClaimRequest(namespaces=[f"{name}/{ns}"], max_events=5))
    assert [e.event_key for e in answer.events] == ["paid"]


async def test_bulk_copy_from_the_cli(
    server: RunningServer, inbox: InboxServiceStub, admin: InboxAdminServiceStub, db: Database, ns: str, name: str
) -> None:
    await inbox.Accept(accept_request(ns, "cli_old"))
    await admin.CreateSubscription(admin_pb2.CreateSubscriptionRequest(name=name, namespace_pattern=ns, reason="r"))
    target = ["--target", f"127.0.0.1:{server.port}"]
    started = await run_cli(
        "bulk", "copy", "--subscription", name, "-n", ns, "--reason", "backfill", "--no-wait", *target
    )
    assert started.code == 0, started.stderr
    await carry(server, started.stdout.strip())
    assert (await namespaces_of(db, ns, name))[f"{name}/{ns}"] == {"cli_old"}
    shown = await run_cli("bulk", "show", started.stdout.strip(), *target)
    assert shown.code == 0 and f"COPY for subscription {name}" in shown.stdout, shown
