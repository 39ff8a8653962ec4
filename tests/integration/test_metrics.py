"""Prometheus metrics on INBOXD_METRICS_LISTEN: they parse, and they move with what the inbox does."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from inboxd.background.retention import run_retention_pass
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd_client.v1 import admin_pb2, admin_pb2_grpc, inbox_pb2, inbox_pb2_grpc, types_pb2
from tests.conftest import CLOCKED_SETTINGS, FakeClock
from tests.integration.helpers import accept_request, expect_status, seconds
from tests.integration.test_claims import claim_one, fenced
from tests.integration.test_flow_control import remove_rules

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(scope="module")
def metrics_clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(scope="module")
async def metered(db: Database, metrics_clock: FakeClock) -> AsyncIterator[RunningServer]:
    # The suite's database holds thousands of namespaces: every one keeps its own label here (the cap on
    # labels, INBOXD_METRICS_MAX_NAMESPACES, has tests of its own in tests/unit/test_metrics_exposure.py).
    settings = replace(CLOCKED_SETTINGS, metrics_listen="127.0.0.1:0", metrics_max_namespaces=1_000_000)
    running = await start_server(settings, db, clock=metrics_clock)
    yield running
    await running.stop(1.0)


@pytest.fixture(scope="module")
async def channel(metered: RunningServer) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{metered.port}") as chan:
        yield chan


async def http_get(port: int, path: str) -> tuple[str, str]:
    """(status line, body) of one plain HTTP GET."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: test\r\n\r\n".encode())
    await writer.drain()
    raw = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = raw.decode().partition("\r\n\r\n")
    return head.splitlines()[0], body


async def scrape(server: RunningServer) -> Samples:
    assert server.ops is not None and server.ops.metrics_port is not None
    status, body = await http_get(server.ops.metrics_port, "/metrics")
    assert status == "HTTP/1.1 200 OK"
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def test_counters_move_with_accepts_claims_completions_failures_and_stale_claims(
    metered: RunningServer, channel: grpc.aio.Channel, ns: str, metrics_clock: FakeClock
) -> None:
    work = inbox_pb2_grpc.InboxServiceStub(channel)
    before = await scrape(metered)
    await work.Accept(accept_request(ns, "a"))
    await work.Accept(accept_request(ns, "a"))  # duplicate
    await work.Accept(accept_request(ns, "a", {"other": True}))  # conflict
    crashed = await claim_one(work, ns, lease=seconds(5))
    metrics_clock.advance(6)
    taken = await claim_one(work, ns)  # takes over the expired lease
    assert taken.event_key == crashed.event_key
    await expect_status(work.Complete(inbox_pb2.CompleteRequest(**fenced(crashed))), grpc.StatusCode.ABORTED)
    await work.RecordActionOutcome(
        inbox_pb2.RecordActionOutcomeRequest(**fenced(taken), action="x", state=types_pb2.ACTION_STATE_INTENDED)
    )
    await work.Complete(inbox_pb2.CompleteRequest(**fenced(taken)))
    await work.Accept(accept_request(ns, "b"))
    other = await claim_one(work, ns)
    await work.Fail(inbox_pb2.FailRequest(**fenced(other), error="boom", retry_after=seconds(0)))
    again = await claim_one(work, ns)
    await work.Fail(inbox_pb2.FailRequest(**fenced(again), error="boom", permanent=True))
    after = await scrape(metered)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("inboxd_accepts_total", outcome="accepted") == 2
    assert moved("inboxd_accepts_total", outcome="duplicate") == 1
    assert moved("inboxd_accepts_total", outcome="conflict") == 1
    assert moved("inboxd_claims_total") == 4
    assert moved("inboxd_lease_expiries_total") == 1
    assert moved("inboxd_stale_claims_rejected_total", call="Complete") == 1
    assert moved("inboxd_completions_total", disposition="applied") == 1
    assert moved("inboxd_failures_total", result="retry") == 1
    assert moved("inboxd_failures_total", result="dead_lettered") == 1
    assert moved("inboxd_actions_recorded_total", state="intended") == 1
    assert moved("inboxd_rpc_duration_seconds_count", method="Accept", code="OK") == 4
    assert moved("inboxd_rpc_duration_seconds_count", method="Complete", code="ABORTED") == 1


async def test_health_gauges_come_from_the_stats_query(
    metered: RunningServer, channel: grpc.aio.Channel, ns: str, metrics_clock: FakeClock
) -> None:
    work = inbox_pb2_grpc.InboxServiceStub(channel)
    await work.Accept(accept_request(ns, "waiting"))
    await work.Accept(accept_request(ns, "dead"))
    dead = await claim_one(work, ns, event_types=["test.event"])
    await work.Fail(inbox_pb2.FailRequest(**fenced(dead), error="bad", permanent=True))
    metrics_clock.advance(42)
    assert metered.ops is not None
    await metered.ops.refresh_stats()  # a scrape may reuse gauges up to 5 s old
    samples = await scrape(metered)
    assert value(samples, "inboxd_events", namespace=ns, state="pending") == 1
    assert value(samples, "inboxd_events", namespace=ns, state="dead_lettered") == 1
    assert value(samples, "inboxd_dead_letters", namespace=ns) == 1
    assert value(samples, "inboxd_oldest_claimable_age_seconds", namespace=ns) == 42
    assert value(samples, "inboxd_unresolved_actions", namespace=ns) == 0
    assert value(samples, "inboxd_stats_refreshed_timestamp_seconds") > 0


async def test_admin_rpcs_and_retention_are_counted(
    metered: RunningServer, channel: grpc.aio.Channel, db: Database, ns: str, metrics_clock: FakeClock
) -> None:
    work = inbox_pb2_grpc.InboxServiceStub(channel)
    admin = admin_pb2_grpc.InboxAdminServiceStub(channel)
    await work.Accept(accept_request(ns, "k"))
    event = await claim_one(work, ns)
    await work.Fail(inbox_pb2.FailRequest(**fenced(event), error="bad", permanent=True))
    before = await scrape(metered)
    await admin.Replay(admin_pb2.ReplayRequest(namespace=ns, event_key="k", reason="r"))
    await work.Complete(inbox_pb2.CompleteRequest(**fenced(await claim_one(work, ns))))
    assert metered.ops is not None
    far_future = metrics_clock.now.replace(year=metrics_clock.now.year + 1)
    counts = await run_retention_pass(
        db.conninfo, metered.inbox.settings, now=far_future, observer=metered.ops.inbox.observer, namespace=ns
    )
    assert counts is not None and counts.rows_deleted == 1
    after = await scrape(metered)
    assert (
        value(after, "inboxd_replays_total", state_before="dead_lettered")
        - value(before, "inboxd_replays_total", state_before="dead_lettered")
        == 1
    )
    assert (
        value(after, "inboxd_retention_rows_deleted_total") - value(before, "inboxd_retention_rows_deleted_total") == 1
    )
    assert value(after, "inboxd_rpc_duration_seconds_count", method="Replay", code="OK") >= 1


async def test_the_endpoint_answers_only_metrics(metered: RunningServer) -> None:
    assert metered.ops is not None and metered.ops.metrics_port is not None
    status, _ = await http_get(metered.ops.metrics_port, "/secrets")
    assert status == "HTTP/1.1 404 Not Found"


@pytest.mark.parametrize(
    ("request_bytes", "refusal"),
    [
        (b"GET /metrics?" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: test\r\n\r\n", b"414 URI Too Long"),
        (b"GET /metrics HTTP/1.1\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n", b"431 Request Header Fields Too Large"),
    ],
)
async def test_a_request_line_or_header_over_64_kib_is_refused_by_its_status_and_the_endpoint_serves_on(
    metered: RunningServer, request_bytes: bytes, refusal: bytes
) -> None:
    assert metered.ops is not None and metered.ops.metrics_port is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", metered.ops.metrics_port)
    writer.write(request_bytes)
    await writer.drain()
    raw = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    assert raw.startswith(b"HTTP/1.1 " + refusal + b"\r\n")
    status, _ = await http_get(metered.ops.metrics_port, "/metrics")
    assert status == "HTTP/1.1 200 OK"


async def test_flow_gauges_count_paused_namespaces_and_each_rules_in_flight_against_its_limit(
    metered: RunningServer, channel: grpc.aio.Channel, db: Database, ns: str
) -> None:
    work = inbox_pb2_grpc.InboxServiceStub(channel)
    admin = admin_pb2_grpc.InboxAdminServiceStub(channel)
    for namespace, key in ((f"{ns}/a", "1"), (f"{ns}/a", "2"), (f"{ns}/b", "1")):
        await work.Accept(accept_request(namespace, key))
    await claim_one(work, f"{ns}/a")
    assert metered.ops is not None
    await metered.ops.refresh_stats()
    before = await scrape(metered)
    rule = f"{ns}/*"
    try:
        await admin.SetFlowControl(
            admin_pb2.SetFlowControlRequest(pattern=rule, max_in_flight=4, paused=True, reason="downstream down")
        )
        await metered.ops.refresh_stats()
        samples = await scrape(metered)
        paused = value(samples, "inboxd_flow_paused_namespaces") - value(before, "inboxd_flow_paused_namespaces")
        assert paused == 2
        assert value(samples, "inboxd_flow_in_flight", rule=rule) == 1
        assert value(samples, "inboxd_flow_max_in_flight", rule=rule) == 4
        await admin.SetFlowControl(admin_pb2.SetFlowControlRequest(pattern=rule, remove=True, reason="back"))
        await metered.ops.refresh_stats()
        after = await scrape(metered)
        assert ("inboxd_flow_in_flight", frozenset({("rule", rule)})) not in after
        assert value(after, "inboxd_flow_paused_namespaces") == value(before, "inboxd_flow_paused_namespaces")
    finally:
        await remove_rules(db, ns)


async def test_subscriptions_copies_are_counted_apart_from_accepts(
    metered: RunningServer, channel: grpc.aio.Channel, db: Database, ns: str
) -> None:
    admin = admin_pb2_grpc.InboxAdminServiceStub(channel)
    names = [f"m{uuid.uuid4().hex[:10]}" for _ in range(2)]
    try:
        for name in names:
            request = admin_pb2.CreateSubscriptionRequest(name=name, namespace_pattern=ns, reason="metrics")
            await admin.CreateSubscription(request)
        before = await scrape(metered)
        await inbox_pb2_grpc.InboxServiceStub(channel).Accept(accept_request(ns, "fanned"))
        after = await scrape(metered)
    finally:
        for name in names:
            await admin.DeleteSubscription(admin_pb2.DeleteSubscriptionRequest(name=name, reason="done"))
    moved = {n: value(after, n, **lb) - value(before, n, **lb) for n, lb in (
        ("inboxd_accepts_total", {"outcome": "accepted"}), ("inboxd_subscription_copies_total", {}))}  # fmt: skip
    assert moved == {"inboxd_accepts_total": 1, "inboxd_subscription_copies_total": 2}
