"""Ordering keys: one event of a key in flight at a time, in revision order, and stale revisions IGNORED.

The seed cases of issue 16, each against a real server and PostgreSQL: the
clock is passed in (leases expire and backoffs pass without sleeping), and
"never handed to a worker" is read from the inbox_claims ledger.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any

import grpc
import pytest

from inboxd.config.settings import ConfigError, load_settings
from inboxd.domain.vocabulary import EventState, StaleRevisions
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd_client.v1 import admin_pb2, inbox_pb2, inbox_pb2_grpc, types_pb2
from inboxd_client.v1.admin_pb2_grpc import InboxAdminServiceStub
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import CLOCKED_SETTINGS, FakeClock
from tests.integration.admin_fixtures import clocked_admin, run_cli
from tests.integration.helpers import accept_request, read_event, seconds
from tests.integration.test_claims import claim_none, claim_one, fenced
from tests.integration.test_metrics import scrape, value
from tests.integration.test_rescuer import rescue

__all__ = ["clocked_admin"]  # the fixture, imported so pytest finds it

IGNORED = types_pb2.DISPOSITION_IGNORED
COMPLETED = types_pb2.EVENT_STATE_COMPLETED


async def accept(work: InboxServiceStub, ns: str, key: str, revision: int, ordering_key: str = "customer-1") -> None:
    await work.Accept(accept_request(ns, key, ordering_key=ordering_key, revision=revision))


async def claim_all(work: InboxServiceStub, ns: str) -> list[inbox_pb2.ClaimedEvent]:
    answer = await work.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], max_events=100))
    return list(answer.events)


async def claims_of(db: Database, ns: str, key: str) -> int:
    async def work(conn: Any) -> int:
        cur = await conn.execute("SELECT count(*) FROM inbox_claims WHERE namespace = %s AND event_key = %s", (ns, key))
        row = await cur.fetchone()
        return int(row[0])

    return await db.run(work)


async def test_revision_4_after_5_was_applied_is_ignored_with_its_reason_and_never_handed_out(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, db: Database, ns: str
) -> None:
    await accept(work, ns, "v5", revision=5)
    five = await claim_one(work, ns)
    assert (five.event_key, five.revision, five.applied_revision, five.stale) == ("v5", 5, 0, False)
    # The older revision arrives while the newer one is in flight: it waits its turn...
    await accept(work, ns, "v4", revision=4)
    await claim_none(work, ns)
    await work.Complete(inbox_pb2.CompleteRequest(**fenced(five)))
    # ...and then is stale: completed IGNORED by the Claim, which hands out nothing.
    await claim_none(work, ns)
    row = await read_event(db, ns, "v4")
    assert (row["state"], row["disposition"]) == ("completed", "ignored")
    assert "4" in row["disposition_reason"] and "5" in row["disposition_reason"]
    assert "stale revision" in row["disposition_reason"]
    assert row["claim_token"] is None
    assert await claims_of(db, ns, "v4") == 0
    assert (await read_event(db, ns, "v5"))["disposition"] == "applied"
    # Visible to operators: the record and the listing.
    shown = (await clocked_admin.GetEvent(admin_pb2.GetEventRequest(namespace=ns, event_key="v4"))).event
    assert shown.disposition == IGNORED
    assert shown.disposition_reason == row["disposition_reason"]
    listed = await clocked_admin.ListEvents(admin_pb2.ListEventsRequest(namespace=ns, state=COMPLETED))
    assert {e.event_key for e in listed.events} == {"v4", "v5"}


async def test_revision_4_then_5_are_both_applied_one_at_a_time_in_order(
    work: InboxServiceStub, db: Database, ns: str
) -> None:
    await accept(work, ns, "v4", revision=4)
    await accept(work, ns, "v5", revision=5)
    [four] = await claim_all(work, ns)
    assert (four.event_key, four.applied_revision) == ("v4", 0)
    await claim_none(work, ns)  # v5 waits while v4 is in flight
    await work.Complete(inbox_pb2.CompleteRequest(**fenced(four)))
    [five] = await claim_all(work, ns)
    assert (five.event_key, five.applied_revision, five.stale) == ("v5", 4, False)
    await work.Complete(inbox_pb2.CompleteRequest(**fenced(five)))
    for key in ("v4", "v5"):
        assert (await read_event(db, ns, key))["disposition"] == "applied"


async def test_revisions_accepted_out_of_order_are_claimed_by_revision(work: InboxServiceStub, ns: str) -> None:
    for key, revision in (("v7", 7), ("v6", 6), ("v8", 8)):
        await accept(work, ns, key, revision)
    handed_out = []
    while events := await claim_all(work, ns):
        [event] = events
        handed_out.append(event.event_key)
        await work.Complete(inbox_pb2.CompleteRequest(**fenced(event)))
    assert handed_out == ["v6", "v7", "v8"]


async def test_events_without_an_ordering_key_are_claimed_together_beside_keyed_ones(
    work: InboxServiceStub, ns: str
) -> None:
    for key in ("plain-1", "plain-2", "plain-3"):
        await work.Accept(accept_request(ns, key))
    await accept(work, ns, "a1", 1, ordering_key="a")
    await accept(work, ns, "a2", 2, ordering_key="a")
    await accept(work, ns, "b1", 1, ordering_key="b")
    events = await claim_all(work, ns)
    assert sorted(e.event_key for e in events) == ["a1", "b1", "plain-1", "plain-2", "plain-3"]
    assert all(e.applied_revision == 0 and not e.stale for e in events)


async def test_an_expired_lease_gives_the_same_event_back_before_the_next_of_its_key(
    work: InboxServiceStub, db: Database, ns: str, clock: FakeClock
) -> None:
    await accept(work, ns, "v2", revision=2)
    await accept(work, ns, "v3", revision=3)
    crashed = await claim_one(work, ns, lease=seconds(5), max_events=10)
    assert crashed.event_key == "v2"
    # An older revision arrives mid-work: it still does not overtake the event in flight.
    await accept(work, ns, "v1", revision=1)
    clock.advance(6)
    again = await claim_one(work, ns, max_events=10)
    assert (again.event_key, again.attempt) == ("v2", 2)
    await work.Complete(inbox_pb2.CompleteRequest(**fenced(again)))
    # v1 is stale now (1 <= 2); v3 is next.
    [three] = await claim_all(work, ns)
    assert (three.event_key, three.applied_revision) == ("v3", 2)
    assert (await read_event(db, ns, "v1"))["disposition"] == "ignored"


async def test_a_failed_event_keeps_its_key_through_its_backoff_and_stats_show_the_blocked_key(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, ns: str, clock: FakeClock
) -> None:
    await accept(work, ns, "v1", revision=1)
    await accept(work, ns, "v2", revision=2)
    first = await claim_one(work, ns)
    await work.Fail(inbox_pb2.FailRequest(**fenced(first), error="downstream down", retry_after=seconds(60)))
    clock.advance(10)
    await claim_none(work, ns)  # v2 waits for v1's retry
    stats = (await clocked_admin.Stats(admin_pb2.StatsRequest(namespace=ns))).namespaces[0]
    assert stats.blocked_ordering_keys == 1
    assert stats.oldest_blocked_age.ToTimedelta().total_seconds() == pytest.approx(10, abs=1)
    clock.advance(60)
    retried = await claim_one(work, ns, max_events=10)
    assert (retried.event_key, retried.attempt) == ("v1", 2)
    await work.Complete(inbox_pb2.CompleteRequest(**fenced(retried)))
    stats = (await clocked_admin.Stats(admin_pb2.StatsRequest(namespace=ns))).namespaces[0]
    assert stats.blocked_ordering_keys == 0
    assert not stats.HasField("oldest_blocked_age")
    assert (await claim_one(work, ns)).event_key == "v2"


async def test_an_event_the_rescuer_put_back_keeps_its_key_and_comes_back_first(
    work: InboxServiceStub, clocked_server: RunningServer, ns: str, clock: FakeClock
) -> None:
    await accept(work, ns, "v2", revision=2)
    await accept(work, ns, "v3", revision=3)
    await claim_one(work, ns, lease=seconds(5))
    await accept(work, ns, "v1", revision=1)  # older, and first by revision: it must still wait
    past_grace = clock.advance(5 + CLOCKED_SETTINGS.rescue_grace.total_seconds() + 1)
    assert await rescue(clocked_server, past_grace, ns) == [(ns, "test.event", EventState.PENDING)]
    [again] = await claim_all(work, ns)
    assert (again.event_key, again.attempt) == ("v2", 2)


async def test_completing_inside_the_workers_own_transaction_raises_the_applied_revision(
    work: InboxServiceStub, db: Database, ns: str
) -> None:
    await accept(work, ns, "v5", revision=5)
    five = await claim_one(work, ns)

    async def business_transaction(conn: Any) -> None:
        await conn.execute("SELECT inboxd_complete(%s, %s, %s)", (ns, "v5", five.claim_token))

    await db.run(business_transaction)
    await accept(work, ns, "v4", revision=4)
    await claim_none(work, ns)
    assert (await read_event(db, ns, "v4"))["disposition"] == "ignored"


async def test_inboxd_stats_shows_the_blocked_keys_and_the_oldest_wait(
    work: InboxServiceStub, clocked_server: RunningServer, ns: str, clock: FakeClock
) -> None:
    for key in ("a", "b"):
        await accept(work, ns, f"{key}1", 1, ordering_key=key)
        await accept(work, ns, f"{key}2", 2, ordering_key=key)
    await accept(work, ns, "c1", 1, ordering_key="c")
    assert len(await claim_all(work, ns)) == 3  # a1, b1, c1: a2 and b2 wait behind them
    clock.advance(125)
    table = await run_cli("stats", "--target", f"127.0.0.1:{clocked_server.port}", "--namespace", ns)
    assert table.code == 0, table.stderr
    header, row = table.stdout.splitlines()
    # The blocked columns, then connected workers (none: no Work stream here).
    assert header.endswith("BLOCKED KEYS  OLDEST BLOCKED  WORKERS")
    assert row.split()[-3:] == ["2", "2m5s", "0"]


async def test_a_released_event_comes_back_before_the_next_of_its_key(work: InboxServiceStub, ns: str) -> None:
    await accept(work, ns, "v1", revision=1)
    await accept(work, ns, "v2", revision=2)
    first = await claim_one(work, ns)
    await work.Release(inbox_pb2.ReleaseRequest(**fenced(first)))
    assert (await claim_one(work, ns, max_events=10)).event_key == "v1"


async def test_a_dead_lettered_event_lets_its_key_go_on_and_is_delivered_stale_when_replayed_behind_a_newer_revision(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, db: Database, ns: str
) -> None:
    await accept(work, ns, "v1", revision=1)
    await accept(work, ns, "v2", revision=2)
    poison = await claim_one(work, ns)
    answer = await work.Fail(inbox_pb2.FailRequest(**fenced(poison), error="bad schema", permanent=True))
    assert answer.state == types_pb2.EVENT_STATE_DEAD_LETTERED
    # The key is not blocked by its dead letter: the next revision is claimable at once.
    nxt = await claim_one(work, ns, max_events=10)
    assert (nxt.event_key, nxt.applied_revision) == ("v2", 0)
    await work.Complete(inbox_pb2.CompleteRequest(**fenced(nxt)))
    # Replayed after a newer revision was applied, the dead letter is stale, and
    # delivered all the same, flagged: a Replay is an operator's explicit wish.
    await clocked_admin.Replay(admin_pb2.ReplayRequest(namespace=ns, event_key="v1", reason="fixed the schema"))
    again = await claim_one(work, ns, max_events=10)
    assert (again.event_key, again.stale, again.applied_revision) == ("v1", True, 2)
    assert await claims_of(db, ns, "v1") == 2


async def test_a_dead_letter_replayed_before_a_newer_revision_is_applied_is_handed_out(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, ns: str
) -> None:
    await accept(work, ns, "v1", revision=1)
    poison = await claim_one(work, ns)
    await work.Fail(inbox_pb2.FailRequest(**fenced(poison), error="bad schema", permanent=True))
    await clocked_admin.Replay(admin_pb2.ReplayRequest(namespace=ns, event_key="v1", reason="fixed"))
    again = await claim_one(work, ns)
    assert (again.event_key, again.stale) == ("v1", False)


async def test_an_event_without_a_revision_is_never_stale(work: InboxServiceStub, db: Database, ns: str) -> None:
    await accept(work, ns, "v3", revision=3)
    await work.Complete(inbox_pb2.CompleteRequest(**fenced(await claim_one(work, ns))))
    await accept(work, ns, "note", revision=0)
    note = await claim_one(work, ns)
    assert (note.event_key, note.applied_revision, note.stale) == ("note", 3, False)


# -- INBOXD_STALE_REVISIONS=deliver and the metrics --


@pytest.fixture(scope="module")
def side_clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(scope="module")
async def delivering(db: Database, side_clock: FakeClock) -> AsyncIterator[InboxServiceStub]:
    """A server that hands stale events out flagged instead of ignoring them."""
    settings = replace(CLOCKED_SETTINGS, stale_revisions=StaleRevisions.DELIVER)
    running = await start_server(settings, db, clock=side_clock)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as chan:
        yield inbox_pb2_grpc.InboxServiceStub(chan)
    await running.stop(1.0)


@pytest.fixture(scope="module")
async def metered(db: Database, side_clock: FakeClock) -> AsyncIterator[RunningServer]:
    running = await start_server(replace(CLOCKED_SETTINGS, metrics_listen="127.0.0.1:0"), db, clock=side_clock)
    yield running
    await running.stop(1.0)


async def test_with_stale_revisions_delivered_the_worker_sees_the_stale_event_flagged(
    delivering: InboxServiceStub, db: Database, ns: str
) -> None:
    await accept(delivering, ns, "v5", revision=5)
    await delivering.Complete(inbox_pb2.CompleteRequest(**fenced(await claim_one(delivering, ns))))
    await accept(delivering, ns, "v4", revision=4)
    four = await claim_one(delivering, ns)
    assert (four.event_key, four.revision, four.applied_revision, four.stale) == ("v4", 4, 5, True)
    await delivering.Complete(
        inbox_pb2.CompleteRequest(**fenced(four), disposition=IGNORED, reason="older than what we hold")
    )
    assert (await read_event(db, ns, "v4"))["disposition_reason"] == "older than what we hold"


async def test_stale_revisions_ignored_are_counted_in_the_metrics(metered: RunningServer, ns: str) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{metered.port}") as chan:
        work = inbox_pb2_grpc.InboxServiceStub(chan)
        before = value(await scrape(metered), "inboxd_stale_revisions_ignored_total")
        await accept(work, ns, "v5", revision=5)
        await work.Complete(inbox_pb2.CompleteRequest(**fenced(await claim_one(work, ns))))
        await accept(work, ns, "v4", revision=4)
        await accept(work, ns, "v3", revision=3)
        await claim_none(work, ns)
        await claim_none(work, ns)
        after = value(await scrape(metered), "inboxd_stale_revisions_ignored_total")
    assert after - before == 2


def test_the_stale_revisions_setting_reads_ignore_or_deliver_and_names_itself_when_wrong() -> None:
    assert load_settings({}).stale_revisions is StaleRevisions.IGNORE
    assert load_settings({"INBOXD_STALE_REVISIONS": "deliver"}).stale_revisions is StaleRevisions.DELIVER
    assert load_settings({}, {"stale_revisions": "Deliver"}).stale_revisions is StaleRevisions.DELIVER
    with pytest.raises(ConfigError, match="INBOXD_STALE_REVISIONS"):
        load_settings({"INBOXD_STALE_REVISIONS": "drop"})


# -- many workers --

KEYS = 100
REVISIONS_PER_KEY = 5
WORKERS = 16

# Live claims per ordering key, in one snapshot of the claims ledger: a claim
# row is written with its Claim and ended with its Complete, atomically, so
# any snapshot shows exactly the claims live at one instant.
LIVE_CLAIMS_PER_KEY = (
    "SELECT e.ordering_key, count(*) FROM inbox_claims AS c JOIN inbox_events AS e USING (namespace, event_key)"
    " WHERE c.namespace = %s AND c.ended_at IS NULL GROUP BY e.ordering_key HAVING count(*) > 1"
)


@dataclass
class Holdings:
    """Which keys the workers hold right now, and every time a Claim handed out a key already held."""

    held: set[str] = field(default_factory=set)
    doubles: list[str] = field(default_factory=list)


async def _worker(work: InboxServiceStub, ns: str, accepting: asyncio.Event, holdings: Holdings) -> None:
    """Claims, holds its events a moment, lets go and completes them; until the namespace is done."""
    while True:
        answer = await work.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], max_events=5, worker_id="w"))
        if not answer.events:
            if not accepting.is_set():
                return
            await asyncio.sleep(0.01)
            continue
        keys = [e.ordering_key for e in answer.events]
        holdings.doubles.extend(k for k in keys if k in holdings.held)
        holdings.held.update(keys)
        await asyncio.sleep(0.005)
        # Let go before completing: the key's next Claim can only answer after the Complete commits.
        holdings.held.difference_update(keys)
        await work.CompleteBatch(
            inbox_pb2.CompleteBatchRequest(completions=[inbox_pb2.CompleteRequest(**fenced(e)) for e in answer.events])
        )


async def _watch_ledger(db: Database, ns: str, running: asyncio.Event) -> list[tuple[str, int]]:
    """Reads the live claims per key over and over while the workers run; every key seen live twice."""
    found: list[tuple[str, int]] = []

    async def look(conn: Any) -> list[tuple[str, int]]:
        cur = await conn.execute(LIVE_CLAIMS_PER_KEY, (ns,))
        return list(await cur.fetchall())

    while running.is_set():
        found.extend(await db.run(look, transaction=False))
        await asyncio.sleep(0.001)
    return found


async def test_sixteen_workers_over_a_hundred_keys_never_hold_two_events_of_one_key_at_once(
    inbox: InboxServiceStub, db: Database, ns: str
) -> None:
    # Each key's revisions arrive shuffled, half of them while the workers run.
    rng = random.Random(16)
    arrivals = [(f"key-{k}", r) for k in range(KEYS) for r in range(1, REVISIONS_PER_KEY + 1)]
    rng.shuffle(arrivals)
    half = len(arrivals) // 2
    for key, revision in arrivals[:half]:
        await accept(inbox, ns, f"{key}/v{revision}", revision, ordering_key=key)
    accepting, running, holdings = asyncio.Event(), asyncio.Event(), Holdings()
    accepting.set()
    running.set()
    watcher = asyncio.create_task(_watch_ledger(db, ns, running))
    workers = [asyncio.create_task(_worker(inbox, ns, accepting, holdings)) for _ in range(WORKERS)]
    for key, revision in arrivals[half:]:
        await accept(inbox, ns, f"{key}/v{revision}", revision, ordering_key=key)
    accepting.clear()
    await asyncio.gather(*workers)
    running.clear()
    assert await watcher == []
    assert holdings.doubles == []
    assert await claim_all(inbox, ns) == []

    async def outcomes(conn: Any) -> list[tuple[str, str, int, Any, int]]:
        cur = await conn.execute(
            "SELECT e.ordering_key, e.state, e.revision, e.disposition,"
            "       (SELECT count(*) FROM inbox_claims AS c WHERE c.namespace = e.namespace"
            "          AND c.event_key = e.event_key AND c.outcome IS DISTINCT FROM 'completed')"
            " FROM inbox_events AS e WHERE e.namespace = %s ORDER BY e.ordering_key, e.completed_at, e.revision",
            (ns,),
        )
        return list(await cur.fetchall())

    rows = await db.run(outcomes)
    assert len(rows) == KEYS * REVISIONS_PER_KEY
    assert all(state == "completed" and unfinished == 0 for _, state, _, _, unfinished in rows)
    for key in {row[0] for row in rows}:
        applied = [revision for k, _, revision, disposition, _ in rows if k == key and disposition == "applied"]
        # A stale revision is never applied: what was applied only ever went up.
        assert applied == sorted(set(applied)), (key, applied)
