"""A namespace at its max_in_flight takes over its own expired leases (DESIGN, Flow control).

A takeover moves no count: the expired lease was one of the namespace's
leases, and the new one replaces it. So a limit never strands the events of
workers that vanished while they held every slot, even with the lease
rescuer off (INBOXD_RESCUE_INTERVAL=0, as every test server here runs).
Time is the `clock` fixture: the leases expire by moving it, never by sleeping.
"""

from __future__ import annotations

import asyncio

from inboxd.store.database import Database
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import FakeClock
from tests.integration.helpers import seconds
from tests.integration.test_flow_claims import accept_many, claim, most_held_at_once, set_rule
from tests.integration.work_streams import Worker

LEASE = 2.0


async def fill_the_limit_and_vanish(work: InboxServiceStub, limited: str) -> list[inbox_pb2.ClaimedEvent]:
    """Two workers each lease one event of the namespace (its limit is 2) and are never heard of again."""
    held: list[inbox_pb2.ClaimedEvent] = []
    for worker in ("w1", "w2"):
        answer = await work.Claim(
            inbox_pb2.ClaimRequest(namespaces=[limited], max_events=1, lease=seconds(LEASE), worker_id=worker)
        )
        held.extend(answer.events)
    assert len(held) == 2
    # At its limit while the leases run: nothing more is handed out.
    assert await claim(work, [limited]) == []
    return held


async def test_a_namespace_at_its_limit_takes_over_its_own_expired_leases(
    work: InboxServiceStub, db: Database, clock: FakeClock, ns: str
) -> None:
    limited = f"{ns}/smtp"
    await set_rule(db, clock, limited, max_in_flight=2)
    await accept_many(work, limited, 5)
    vanished = await fill_the_limit_and_vanish(work, limited)
    clock.advance(LEASE + 1)
    again = await claim(work, [limited])
    # The expired two, on their second attempt; no fresh one, the limit being full.
    assert sorted(e.event_key for e in again) == sorted(e.event_key for e in vanished)
    assert [e.attempt for e in again] == [2, 2]
    assert await most_held_at_once(db, limited) == 2


async def test_a_pattern_claim_takes_over_at_the_limit_beside_free_namespaces(
    work: InboxServiceStub, db: Database, clock: FakeClock, ns: str
) -> None:
    limited = f"{ns}/smtp"
    await set_rule(db, clock, limited, max_in_flight=2)
    await accept_many(work, limited, 5)
    vanished = await fill_the_limit_and_vanish(work, limited)
    await accept_many(work, f"{ns}/free", 3)
    clock.advance(LEASE + 1)
    again = await claim(work, [f"{ns}/*"])
    taken_over = sorted(e.event_key for e in again if e.namespace == limited)
    assert taken_over == sorted(e.event_key for e in vanished)
    assert sum(e.namespace == f"{ns}/free" for e in again) == 3
    assert await most_held_at_once(db, limited) == 2


async def test_a_work_stream_takes_over_the_expired_leases_of_a_namespace_at_its_limit(
    work: InboxServiceStub, db: Database, clock: FakeClock, ns: str
) -> None:
    limited = f"{ns}/smtp"
    await set_rule(db, clock, limited, max_in_flight=2)
    await accept_many(work, limited, 5)
    vanished = await fill_the_limit_and_vanish(work, limited)
    worker = Worker(work)
    await worker.subscribe([limited], credit=5, lease=60)
    clock.advance(LEASE + 1)
    # Woken by the poller's next look (the clock moved): within READ_WITHIN seconds a read.
    pushed = await worker.pushed(2)
    assert sorted(e.event_key for e in pushed) == sorted(e.event_key for e in vanished)
    # And no third one: the limit is full again.
    try:
        await asyncio.wait_for(worker.read(), 1.5)
        raise AssertionError(f"pushed beyond max_in_flight 2: {[e.event_key for e in worker.events]}")
    except TimeoutError:
        pass
    worker.call.cancel()
    assert await most_held_at_once(db, limited) == 2


async def test_concurrent_claimers_taking_over_expired_leases_never_exceed_the_limit(
    work: InboxServiceStub, db: Database, clock: FakeClock, ns: str
) -> None:
    """Eight claimers at once, round after round, each round's leases left to expire: never more than 3 leased.

    Nobody completes anything: each round takes over the last one's leases
    (or dead-letters them on their third attempt, which frees their slots for
    fresh events), all under the limit's lock.
    """
    limited = f"{ns}/smtp"
    await set_rule(db, clock, limited, max_in_flight=3)
    await accept_many(work, limited, 12)
    request = inbox_pb2.ClaimRequest(namespaces=[f"{ns}/*"], max_events=5, lease=seconds(LEASE))
    handed_out = 0
    for _ in range(8):
        answers = await asyncio.gather(*(work.Claim(request) for _ in range(8)))
        taken = sum(len(answer.events) for answer in answers)
        assert taken <= 3, f"{taken} handed out in one round under max_in_flight 3"
        handed_out += taken
        clock.advance(LEASE + 1)
    # Every round handed out a full limit again: takeovers, then fresh events as the old ones dead-lettered.
    assert handed_out == 8 * 3
    assert await most_held_at_once(db, limited) == 3
