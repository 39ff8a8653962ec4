"""Flow control in the claim path (DESIGN, Flow control): fair turns, weights, pause, ramps, limits, rates.

Every test keeps to namespaces under its own `ns` (claimed by the glob
`ns/*`, which Claim.namespaces now takes), and writes its rules straight into
inbox_flow_rules (the admin API's own tests cover SetFlowControl): the claim
statement reads them at every Claim. Counts come from the claims ledger or
the answers, never from timers; time is the `clock` fixture.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from inboxd.domain.namespace_patterns import grant_to_like
from inboxd.store.database import Database
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import FakeClock
from tests.integration.helpers import accept_request
from tests.integration.work_streams import EOF, Worker


async def accept_many(work: InboxServiceStub, namespace: str, count: int, prefix: str = "e") -> None:
    """`count` events into `namespace`, in order of acceptance (so of due time), 500 a call."""
    for start in range(0, count, 500):
        keys = range(start, min(count, start + 500))
        await work.AcceptBatch(
            inbox_pb2.AcceptBatchRequest(events=[accept_request(namespace, f"{prefix}{i:05d}") for i in keys])
        )


async def set_rule(db: Database, clock: FakeClock, pattern: str, **rule: Any) -> None:
    """A flow-control rule as SetFlowControl stores it (specificity: domain/flow_rules.py)."""
    is_pattern = "*" in pattern
    specificity = len(pattern.replace("*", "")) if is_pattern else 1_000_000 + len(pattern)
    fields = {"max_in_flight": None, "rate": None, "burst": None, "paused": False, "weight": 1,
              "resumed_at": None, "ramp": None, "ramp_rate": None, **rule}  # fmt: skip
    columns = ", ".join(fields)
    values = ", ".join(f"%({name})s" for name in fields)
    updates = ", ".join(f"{name} = excluded.{name}" for name in fields)
    params = {**fields, "pattern": pattern, "like": grant_to_like(pattern), "is_pattern": is_pattern,
              "specificity": specificity, "now": clock.now}  # fmt: skip
    statement = (
        f"INSERT INTO inbox_flow_rules (pattern, like_pattern, is_pattern, specificity, {columns},"
        f" updated_at, updated_by) VALUES (%(pattern)s, %(like)s, %(is_pattern)s, %(specificity)s, {values},"
        f" %(now)s, 'test') ON CONFLICT (pattern) DO UPDATE SET {updates}"
    )
    await db.run(lambda conn: conn.execute(statement, params))


async def claim(work: InboxServiceStub, namespaces: list[str], max_events: int = 10) -> list[inbox_pb2.ClaimedEvent]:
    answer = await work.Claim(inbox_pb2.ClaimRequest(namespaces=namespaces, max_events=max_events))
    return list(answer.events)


async def complete(work: InboxServiceStub, events: list[inbox_pb2.ClaimedEvent]) -> None:
    await work.CompleteBatch(
        inbox_pb2.CompleteBatchRequest(
            completions=[
                inbox_pb2.CompleteRequest(namespace=e.namespace, event_key=e.event_key, claim_token=e.claim_token)
                for e in events
            ]
        )
    )


async def drain_counting_noisy(work: InboxServiceStub, namespaces: list[str], noisy: str, quiet: str) -> int:
    """Claims 10 at a time, completing each batch, until the quiet namespace's 10 are out: noisy events before."""
    noisy_out = quiet_out = 0
    while quiet_out < 10:
        events = await claim(work, namespaces)
        assert events, f"nothing claimable with {10 - quiet_out} quiet events still due"
        for event in events:
            if event.namespace == quiet:
                quiet_out += 1
            elif quiet_out < 10:
                noisy_out += 1
        await complete(work, events)
    return noisy_out


async def test_a_quiet_namespace_waits_one_turn_behind_a_noisy_backlog_claimed_by_pattern(
    work: InboxServiceStub, ns: str
) -> None:
    noisy, quiet = f"{ns}/noisy", f"{ns}/quiet"
    await accept_many(work, noisy, 600)
    await accept_many(work, quiet, 10)
    # Oldest first across namespaces handed out all 600 before the first quiet event.
    assert await drain_counting_noisy(work, [f"{ns}/*"], noisy, quiet) <= 20


async def test_a_quiet_namespace_waits_one_turn_behind_a_noisy_backlog_claimed_by_name(
    work: InboxServiceStub, ns: str
) -> None:
    noisy, quiet = f"{ns}/noisy", f"{ns}/quiet"
    await accept_many(work, noisy, 600)
    await accept_many(work, quiet, 10)
    assert await drain_counting_noisy(work, [noisy, quiet], noisy, quiet) <= 20


async def test_many_namespaces_each_get_one_event_a_turn_round_the_ring(work: InboxServiceStub, ns: str) -> None:
    tenants = [f"{ns}/t{i:02d}" for i in range(30)]
    for tenant in tenants:  # the first tenants' events are the oldest
        await accept_many(work, tenant, 4)
    seen: list[str] = []
    for _ in range(3):
        events = await claim(work, [f"{ns}/*"])
        seen.extend(e.namespace for e in events)
        await complete(work, events)
    # Three turns of ten: every tenant once, none twice, before any tenant's second event.
    assert sorted(seen) == tenants


async def test_a_namespace_glob_outside_the_ones_it_names_matches_nothing_else(work: InboxServiceStub, ns: str) -> None:
    for name in ("ab", "ac", "b"):
        await accept_many(work, f"{ns}/{name}", 1)
    events = await claim(work, [f"{ns}/a*"])
    assert sorted(e.namespace for e in events) == [f"{ns}/ab", f"{ns}/ac"]
    # A name and a glob together take both.
    await complete(work, events)
    await accept_many(work, f"{ns}/ab", 1, prefix="again")
    events = await claim(work, [f"{ns}/b", f"{ns}/a*"])
    assert sorted(e.namespace for e in events) == [f"{ns}/ab", f"{ns}/b"]


async def test_a_weight_is_a_namespaces_share_of_each_turn(
    work: InboxServiceStub, db: Database, clock: FakeClock, ns: str
) -> None:
    await set_rule(db, clock, f"{ns}/heavy", weight=3)
    await accept_many(work, f"{ns}/heavy", 40)
    await accept_many(work, f"{ns}/light", 40)
    events = await claim(work, [f"{ns}/*"], max_events=8)
    shares = [e.namespace.rsplit("/", 1)[1] for e in events]
    assert sorted(shares) == ["heavy"] * 6 + ["light"] * 2


async def test_a_paused_namespace_is_accepted_claimed_by_no_one_and_resumed_with_a_ramp(
    work: InboxServiceStub, db: Database, clock: FakeClock, ns: str
) -> None:
    paused, other = f"{ns}/paused", f"{ns}/other"
    await set_rule(db, clock, f"{ns}/pau*", paused=True)
    await accept_many(work, paused, 100)
    await accept_many(work, other, 3)
    events = await claim(work, [f"{ns}/*"])
    assert sorted({e.namespace for e in events}) == [other]
    assert await claim(work, [paused]) == []
    # Resumed with a 10 s ramp up to 10 events a second: a trickle first, then more, then the backlog.
    await set_rule(db, clock, f"{ns}/pau*", resumed_at=clock.now, ramp=timedelta(seconds=10), ramp_rate=10.0)
    assert len(await claim(work, [paused], max_events=100)) == 1
    assert await claim(work, [paused], max_events=100) == []
    clock.advance(5)  # half way: 5 a second, at most a second's worth at once
    assert len(await claim(work, [paused], max_events=100)) == 5
    clock.advance(6)  # the ramp is over and the rule has no rate (a resume gives it the ramp's; removed since)
    assert len(await claim(work, [paused], max_events=100)) == 100 - 6


async def test_a_rate_hands_out_its_burst_then_a_token_per_interval(
    work: InboxServiceStub, db: Database, clock: FakeClock, ns: str
) -> None:
    limited = f"{ns}/api"
    await set_rule(db, clock, limited, rate=2.0, burst=4)
    await accept_many(work, limited, 50)
    assert len(await claim(work, [limited])) == 4
    assert await claim(work, [limited]) == []
    clock.advance(1)
    assert len(await claim(work, [limited])) == 2
    clock.advance(0.5)
    assert len(await claim(work, [limited])) == 1
    clock.advance(60)  # the bucket holds no more than its burst
    assert len(await claim(work, [limited])) == 4


async def test_max_in_flight_is_never_exceeded_by_concurrent_claimers(
    work: InboxServiceStub, db: Database, clock: FakeClock, ns: str
) -> None:
    limited = f"{ns}/smtp"
    await set_rule(db, clock, f"{ns}/*", max_in_flight=3)
    await accept_many(work, limited, 60)
    held: list[inbox_pb2.ClaimedEvent] = []
    for _ in range(8):
        batches = await asyncio.gather(*(claim(work, [f"{ns}/*"], max_events=5) for _ in range(8)))
        held.extend(e for batch in batches for e in batch)
        assert len(held) <= 3, f"{len(held)} leased at once under max_in_flight 3"
        clock.advance(1)  # the ledger's instants: claims, then a second later a completion
        if held:
            await complete(work, held[:1])
            held = held[1:]
    # From the claims ledger: never more than three open claims of the namespace at one instant.
    assert await most_held_at_once(db, limited) == 3


async def most_held_at_once(db: Database, namespace: str) -> int:
    """The most claims of `namespace` open at one instant, from inbox_claims (a claim ends as the next begins)."""

    async def read(conn: Any) -> int:
        cur = await conn.execute(
            "SELECT max(open) FROM (SELECT sum(step) OVER (ORDER BY at, step) AS open FROM ("
            " SELECT claimed_at AS at, 1 AS step FROM inbox_claims WHERE namespace = %(ns)s"
            " UNION ALL SELECT ended_at, -1 FROM inbox_claims WHERE namespace = %(ns)s AND ended_at IS NOT NULL"
            ") AS steps) AS running",
            {"ns": namespace},
        )
        row = await cur.fetchone()
        return int(row[0] or 0)

    return await db.run(read)


async def test_a_work_stream_is_pushed_fairly_and_within_max_in_flight(
    work: InboxServiceStub, db: Database, clock: FakeClock, ns: str
) -> None:
    await set_rule(db, clock, f"{ns}/limited", max_in_flight=2)
    await accept_many(work, f"{ns}/limited", 20)
    await accept_many(work, f"{ns}/free", 20)
    worker = Worker(work)
    await worker.subscribe([f"{ns}/*"], credit=10, lease=60)
    while len(worker.events) < 10:
        await worker.read()
    counts = {name: sum(e.namespace == f"{ns}/{name}" for e in worker.events) for name in ("limited", "free")}
    assert counts == {"limited": 2, "free": 8}
    await worker.call.done_writing()


async def test_ordering_keys_keep_their_order_under_a_limit(
    work: InboxServiceStub, db: Database, clock: FakeClock, ns: str
) -> None:
    keyed = f"{ns}/keyed"
    await set_rule(db, clock, keyed, max_in_flight=5)
    for revision in (1, 2, 3):
        await work.Accept(accept_request(keyed, f"r{revision}", ordering_key="order-1", revision=revision))
    events = await claim(work, [keyed])
    assert [e.event_key for e in events] == ["r1"]
    await complete(work, events)
    assert [e.event_key for e in await claim(work, [keyed])] == ["r2"]


async def test_a_work_stream_under_a_rate_is_pushed_again_when_its_next_token_is_due(
    work: InboxServiceStub, db: Database, clock: FakeClock, ns: str
) -> None:
    limited = f"{ns}/api"
    await set_rule(db, clock, limited, rate=2.0, burst=2)
    await accept_many(work, limited, 20)
    worker = Worker(work)
    await worker.subscribe([limited], credit=10, lease=60)
    while len(worker.events) < 2:
        await worker.read()
    # The stream waits for the token it was told of (half a second on this clock), not for a wake-up.
    clock.advance(1)
    while len(worker.events) < 4:
        await worker.read()
    assert len(worker.events) == 4
    await worker.call.done_writing()


async def test_work_streams_together_never_hold_more_than_max_in_flight(
    work: InboxServiceStub, db: Database, clock: FakeClock, ns: str
) -> None:
    """Four streams with credit to spare: at every push, at most 3 events are held across all of them.

    Counted from the streams, at each message: the ledger's instants come
    from this test's hand-moved clock, which a stream's look reads before it
    waits for a connection, so a look begun before a completion may be
    stamped earlier than that completion (the unary test and make bench read
    the ledger; on the database's clock its claimed_at is the write's moment).
    """
    limited = f"{ns}/smtp"
    await set_rule(db, clock, limited, max_in_flight=3)
    await accept_many(work, limited, 30)
    workers = [Worker(work) for _ in range(4)]
    for worker in workers:
        await worker.subscribe([limited], credit=5, lease=60)
    done: set[str] = set()
    most: list[int] = []

    def held() -> list[tuple[Worker, inbox_pb2.ClaimedEvent]]:
        return [(w, e) for w in workers for e in w.events if e.event_key not in done]

    pushed = asyncio.Condition()
    pumps = [asyncio.ensure_future(_pump(worker, pushed, lambda: most.append(len(held())))) for worker in workers]
    try:
        for _ in range(12):
            async with pushed:
                await asyncio.wait_for(pushed.wait_for(lambda: len(held()) >= 3), 10)
            holder, event = held()[0]
            done.add(event.event_key)
            await holder.send(complete=inbox_pb2.CompleteRequest(**fenced(event)))
    finally:
        for pump in pumps:
            pump.cancel()
        await asyncio.gather(*pumps, return_exceptions=True)
        for worker in workers:
            worker.call.cancel()
    assert max(most) == 3, most


def fenced(event: inbox_pb2.ClaimedEvent) -> dict[str, str]:
    return {"namespace": event.namespace, "event_key": event.event_key, "claim_token": event.claim_token}


async def _pump(worker: Worker, pushed: asyncio.Condition, count: Callable[[], None]) -> None:
    """Reads one stream for ever, keeping what it was pushed; counts what is held and tells of each message."""
    while True:
        answer = await worker.call.read()
        if answer is EOF:
            return
        if answer.WhichOneof("response") == "events":
            worker.events.extend(answer.events.events)
            count()
        async with pushed:
            pushed.notify_all()


async def test_a_claim_walks_on_past_namespaces_with_nothing_due_to_one_far_round_the_ring(
    work: InboxServiceStub, ns: str
) -> None:
    """Forty namespaces whose events are all leased come first in the ring; the one with a due event is last.

    A turn walks max_events + 16 namespaces: the Claim looks on from where
    its walk stopped instead of answering nothing (wait 0) or sleeping (wait).
    """
    for i in range(40):
        await accept_many(work, f"{ns}/a{i:02d}", 1)
    assert len(await claim(work, [f"{ns}/*"], max_events=40)) == 40
    await accept_many(work, f"{ns}/z", 1)
    # Another filter (the same namespaces): its first turn starts at the ring's start, not after a39.
    events = await claim(work, [f"{ns}/*", f"{ns}/a*"], max_events=1)
    assert [e.namespace for e in events] == [f"{ns}/z"]


async def test_a_namespaces_own_rule_wins_over_the_pattern_that_pauses_its_neighbours(
    work: InboxServiceStub, db: Database, clock: FakeClock, ns: str
) -> None:
    await set_rule(db, clock, f"{ns}/*", paused=True)
    await set_rule(db, clock, f"{ns}/vip", weight=1)
    await set_rule(db, clock, f"{ns}/v*", max_in_flight=1)
    for name in ("vip", "vault", "other"):
        await accept_many(work, f"{ns}/{name}", 3)
    events = await claim(work, [f"{ns}/*"])
    # vip: its own rule (no limit, not paused); vault: v* (one at a time); other: * (paused).
    assert sorted(e.namespace.rsplit("/", 1)[1] for e in events) == ["vault", "vip", "vip", "vip"]
