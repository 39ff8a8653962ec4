"""Scenario 5: PostgreSQL restarts under Accept and Claim load; nothing acknowledged is lost or done twice.

Two `inboxd serve` replicas share a durable cluster of the scenario's own.
Producers keep single Accepts and AcceptBatches flowing; workers Claim with
short leases and Complete. Twice the database goes away under that load:
first a crash (immediate shutdown, recovery on restart), then a clean fast
shutdown. Each outage lasts until calls have been seen refused in it, and
each period between lasts until the service has again acknowledged and
completed work, with no restart of inboxd: it recovers by itself.

While the database is down, every call that starts and ends inside the
outage must answer UNAVAILABLE: none is acknowledged. Producers send what was
refused again, as a provider would. At the end every acknowledged event is
stored and COMPLETED, no event was ACCEPTED twice, and no event was completed
by two claims: the workers count Complete OKs per event by claim token.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

import pytest

from inboxd.serving.embedded_pg import EmbeddedPostgres
from inboxd_client import (
    AcceptOutcome,
    AsyncInboxClient,
    ClaimSuperseded,
    InboxError,
    Unavailable,
    accept_request,
)
from inboxd_client.v1 import inbox_pb2
from tests.harness import eventually
from tests.reliability import ledger
from tests.reliability.rig import (
    client,
    crash_postgres,
    namespace,
    own_cluster,
    query,
    serving,
    start_postgres,
    states,
    stop_postgres,
)

SCENARIO = "database restart"
OUTAGES = ("crash", "stop")
PRODUCERS = 6
BATCH_SIZE = 20
WORKERS = 4
CLAIM_BATCH = 25
LEASE = 3.0
# Between outages: the service must again acknowledge this many events and complete this many.
ACKS_BETWEEN, COMPLETIONS_BETWEEN = 600, 150
# During an outage: calls of each kind seen refused before the database comes back.
REFUSALS_DURING = 3
ACCEPTED = AcceptOutcome.ACCEPT_OUTCOME_ACCEPTED
T = TypeVar("T")


@pytest.fixture(scope="module")
async def restartable_pg() -> AsyncIterator[EmbeddedPostgres]:
    async with own_cluster() as pg:
        yield pg


class Books:
    """What the callers saw, and whether the database was down for the whole of a call."""

    def __init__(self) -> None:
        self.down = False
        self.period = 0  # moves at every outage edge
        self.next_key = 0
        self.resend: list[str] = []
        self.produced: set[str] = set()
        self.acked: set[str] = set()
        self.accepted: Counter[str] = Counter()
        self.deliveries = 0
        self.completions: defaultdict[str, set[str]] = defaultdict(set)
        self.refused_in_outage: Counter[str] = Counter()
        self.ok_in_outage: Counter[str] = Counter()
        self.superseded = 0
        self.unexpected: list[str] = []

    def mark(self) -> tuple[bool, int]:
        return self.down, self.period

    def wholly_down(self, mark: tuple[bool, int]) -> bool:
        """The call began and ended inside one outage."""
        return mark[0] and self.down and mark[1] == self.period

    def edge(self, down: bool) -> None:
        self.down = down
        self.period += 1

    def refused(self, call: str, exc: InboxError, mark: tuple[bool, int]) -> None:
        if not isinstance(exc, Unavailable):
            self.unexpected.append(f"{call}: {exc}")
        if self.wholly_down(mark):
            self.refused_in_outage[call] += 1

    def answered(self, call: str, mark: tuple[bool, int]) -> None:
        if self.wholly_down(mark):
            self.ok_in_outage[call] += 1

    def take_keys(self, count: int) -> list[str]:
        keys = self.resend[:count]
        del self.resend[: len(keys)]
        while len(keys) < count:
            key = f"evt-{self.next_key:06d}"
            self.next_key += 1
            self.produced.add(key)
            keys.append(key)
        return keys

    def progressed(self) -> Callable[[], bool]:
        """A check: the service has acknowledged and completed a good share of work since now."""
        acked, completed = len(self.acked), self.completed
        return lambda: len(self.acked) >= acked + ACKS_BETWEEN and self.completed >= completed + COMPLETIONS_BETWEEN

    def refused_again(self) -> Callable[[], bool]:
        """A check: Accepts and Claims have been refused, wholly inside the outage, since now."""
        before = Counter(self.refused_in_outage)
        return lambda: all(self.refused_in_outage[c] >= before[c] + REFUSALS_DURING for c in ("Accept", "Claim"))

    def describe(self) -> str:
        return (
            f"acked {len(self.acked)}, completed {self.completed}, refused in outage {dict(self.refused_in_outage)}, "
            f"OK in outage {dict(self.ok_in_outage)}, unexpected {self.unexpected[-3:]}"
        )

    @property
    def completed(self) -> int:
        return len(self.completions)


def request(ns: str, key: str) -> inbox_pb2.AcceptRequest:
    return accept_request(ns, key, "payment.settled", {"id": key, "cents": len(key) * 100})


async def produce(
    books: Books, replicas: list[AsyncInboxClient], ns: str, rng: random.Random, stop: asyncio.Event
) -> None:
    """Accepts, single or batched, until `stop` and every refused event has been taken."""
    while not (stop.is_set() and not books.resend):
        batched = rng.random() < 0.5
        keys = books.take_keys(BATCH_SIZE if batched else 1)
        inbox = rng.choice(replicas)
        mark = books.mark()
        books.deliveries += len(keys)
        try:
            if batched:
                answer = await inbox.accept_batch([request(ns, key) for key in keys])
                outcomes = [r.outcome for r in answer.results]
            else:
                outcomes = [
                    (
                        await inbox.accept(ns, keys[0], "payment.settled", {"id": keys[0], "cents": len(keys[0]) * 100})
                    ).outcome
                ]
        except InboxError as exc:
            books.refused("Accept", exc, mark)
            books.resend.extend(keys)
            await asyncio.sleep(0.05)  # a provider's retry pause
            continue
        books.answered("Accept", mark)
        books.acked.update(keys)
        books.accepted.update(k for k, o in zip(keys, outcomes, strict=True) if o == ACCEPTED)
        await asyncio.sleep(0.005)


async def until_answered(call: Callable[[], Awaitable[T]], books: Books, name: str, stop: asyncio.Event) -> T | None:
    """Calls again while UNAVAILABLE, until `stop`; None if the claim was taken over (ABORTED) or stopped."""
    while not stop.is_set():
        mark = books.mark()
        try:
            result = await call()
        except ClaimSuperseded:
            books.superseded += 1
            return None
        except InboxError as exc:
            books.refused(name, exc, mark)
            await asyncio.sleep(0.25)
            continue
        books.answered(name, mark)
        return result
    return None


async def work(
    books: Books, replicas: list[AsyncInboxClient], ns: str, rng: random.Random, stop: asyncio.Event
) -> None:
    """Claims until `stop`; completes each event in the background, counting each Complete OK under its claim token."""
    finishing: set[asyncio.Task[None]] = set()

    async def finish(event: inbox_pb2.ClaimedEvent) -> None:
        done = await until_answered(lambda: rng.choice(replicas).complete(event), books, "Complete", stop)
        if done is not None:
            books.completions[event.event_key].add(event.claim_token)

    while not stop.is_set():
        if len(finishing) >= 4 * CLAIM_BATCH:
            await asyncio.wait(finishing, return_when=asyncio.FIRST_COMPLETED)
            continue
        mark = books.mark()
        try:
            answer = await rng.choice(replicas).claim(
                namespaces=[ns], max_events=CLAIM_BATCH, lease=LEASE, wait=0.5, worker_id="restart-worker"
            )
        except InboxError as exc:
            books.refused("Claim", exc, mark)
            await asyncio.sleep(0.1)
            continue
        books.answered("Claim", mark)
        for event in answer.events:
            task = asyncio.create_task(finish(event))
            finishing.add(task)
            task.add_done_callback(finishing.discard)
    if finishing:
        await asyncio.wait(finishing)


async def test_a_database_restart_under_load_loses_no_acknowledged_event_and_completes_none_twice(
    restartable_pg: EmbeddedPostgres,
) -> None:
    tally = ledger.open_tally(SCENARIO)
    rng = ledger.rng_for(SCENARIO)
    pg = restartable_pg
    url = pg.conninfo
    ns = namespace(SCENARIO)
    books = Books()
    stop_producing = asyncio.Event()
    stop_working = asyncio.Event()

    async with serving(url) as r0, serving(url) as r1, client(r0.target) as c0, client(r1.target) as c1:
        replicas = [c0, c1]
        producers = [
            asyncio.create_task(produce(books, replicas, ns, random.Random(rng.random()), stop_producing))
            for _ in range(PRODUCERS)
        ]
        workers = [
            asyncio.create_task(work(books, replicas, ns, random.Random(rng.random()), stop_working))
            for _ in range(WORKERS)
        ]
        try:
            for outage in OUTAGES:
                await eventually(
                    books.progressed(),
                    lambda: f"the service acknowledges and completes work: {books.describe()}",
                    within=60.0,
                )
                await asyncio.to_thread(crash_postgres if outage == "crash" else stop_postgres, pg)
                books.edge(down=True)
                tally.note(f"outages ({outage})")
                await eventually(
                    books.refused_again(),
                    lambda: f"Accepts and Claims are refused while the database is down: {books.describe()}",
                    within=60.0,
                )
                books.edge(down=False)
                await asyncio.to_thread(start_postgres, pg)
            # It recovered by itself: the same servers acknowledge and complete again.
            await eventually(
                books.progressed(),
                lambda: f"the service acknowledges and completes work after the last restart: {books.describe()}",
                within=60.0,
            )
            stop_producing.set()
            await asyncio.wait_for(asyncio.gather(*producers), 60.0)

            async def all_completed() -> bool:
                stored = await states(url, ns)
                return all(stored.get(key) == "completed" for key in books.produced)

            await eventually(all_completed, "every event completed", within=60.0, every=0.25)
        finally:
            stop_producing.set()
            stop_working.set()
            await asyncio.wait_for(asyncio.gather(*producers, *workers, return_exceptions=True), 60.0)

    stored = await states(url, ns)
    done = {key for key, state in stored.items() if state == "completed"}
    expired = await query(url, "SELECT count(*) FROM inbox_claims WHERE namespace = %s AND outcome = 'expired'", (ns,))
    tally.events += len(books.produced)
    tally.deliveries += books.deliveries
    tally.account(books.acked, done)
    tally.extra(books.accepted)
    tally.duplicated += len(set(stored) - books.produced)
    tally.count_effects({key: len(tokens) for key, tokens in books.completions.items()})
    for call in ("Accept", "Claim", "Complete"):
        tally.note(f"{call} refused while down", books.refused_in_outage[call])
    tally.note("Completes refused as superseded (ABORTED)", books.superseded)
    tally.note("leases expired and taken over", int(expired[0][0]))

    assert not books.unexpected, f"answers other than UNAVAILABLE: {books.unexpected[:5]}"
    assert not books.ok_in_outage, f"acknowledged while the database was down: {dict(books.ok_in_outage)}"
    assert books.acked == books.produced
    assert done == books.produced, f"{len(books.produced - done)} events not completed"
    assert set(books.completions) == books.produced
    tally.close()
