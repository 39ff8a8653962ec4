"""Scenario 11: the primary dies under load, the standby is promoted, and nothing acknowledged is lost.

Two PostgreSQL clusters: a primary and a streaming standby made by
`pg_basebackup -R`. Two `inboxd serve` replicas are given one multi-host URL
(`host=127.0.0.1,127.0.0.1 port=P1,P2 target_session_attrs=read-write`).
Edges keep Accepts and AcceptBatches flowing; workers Claim, record an action
outcome and Complete. Then the primary is frozen (SIGSTOP, every process) and
SIGKILLed, as a machine that dies; Accepts and Claims are seen refused; the
standby is promoted with `pg_ctl promote`. inboxd is not restarted: its pool
and its LISTEN connections find the new primary on their own.

Every call that begins and ends between the kill and the promotion must
answer UNAVAILABLE. Afterwards, on the new primary: every acknowledged Accept
is there, no key was ACCEPTED twice, every acknowledged Complete is there
under the claim that made it, every acknowledged action outcome is there,
and every fencing token issued after the kill is above every token issued
before it (PostgreSQL WAL-logs a sequence up to 32 values ahead, and with a
synchronous standby the standby has every such record behind a committed
claim; a Claim begun before the kill and answered after it, its gRPC retries
having outlived the outage, belongs to neither era and is only counted).
Claims taken on the dead primary, whose events have since been claimed and
completed on the new one, are refused (ABORTED).

With a synchronous standby (`synchronous_standby_names`) all of that is
asserted. The same scenario with an asynchronous standby is run by
`make reliability-async` and only reported: what it loses is why operators
must run a synchronous standby (docs/operations.md, docs/reliability.md).
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from inboxd_client import (
    AcceptOutcome,
    AsyncInboxClient,
    ClaimSuperseded,
    InboxError,
    Unavailable,
    accept_request,
)
from inboxd_client.v1 import inbox_pb2, types_pb2
from tests.harness import eventually
from tests.reliability import ledger
from tests.reliability.replication import (
    cut_off_standby,
    freeze_primary,
    held_commits,
    kill_frozen,
    promote,
    replicated_pair,
    wal_sender,
)
from tests.reliability.rig import client, namespace, query, serving, states

SYNCHRONOUS, ASYNCHRONOUS = "failover", "failover, asynchronous standby"
REPLICAS = 2
PRODUCERS = 3
BATCH_SIZE = 10
WORKERS = 2
CLAIM_BATCH = 10
LEASE = 2.0
# Claims taken on the primary just before it dies, and never finished by their holder.
HELD = 5
# With the standby cut off, before the kill: an asynchronous primary acknowledges this many events more
# (a synchronous one holds the commits instead, and the kill waits for two of them).
LAG_ACKS, LAG_HELD = 60, 2
# Before the kill and after the promotion: the service must acknowledge and complete this much.
ACKS_BETWEEN, COMPLETIONS_BETWEEN = 300, 100
# During the outage: calls of each kind seen refused before the standby is promoted.
REFUSALS_DURING = 3
ACCEPTED = AcceptOutcome.ACCEPT_OUTCOME_ACCEPTED
SUCCEEDED = types_pb2.ACTION_STATE_SUCCEEDED
INTENDED = types_pb2.ACTION_STATE_INTENDED
BEFORE, OUTAGE, AFTER, STRADDLING = 0, 1, 2, 3
T = TypeVar("T")


def action_name(event: inbox_pb2.ClaimedEvent) -> str:
    """One action per claim, so each acknowledged outcome has a row of its own to be found by."""
    return f"receipt:{event.fencing_token}"


class Books:
    """What the callers saw, and in which era of the database each call began."""

    def __init__(self) -> None:
        self.phase = BEFORE
        self.next_key = 0
        self.resend: list[str] = []
        self.produced: set[str] = set()
        self.acked: set[str] = set()
        self.accepted: Counter[str] = Counter()
        self.deliveries = 0
        self.tokens: dict[int, list[int]] = {BEFORE: [], OUTAGE: [], AFTER: [], STRADDLING: []}
        self.completions: defaultdict[str, set[str]] = defaultdict(set)
        self.outcomes: set[tuple[str, str]] = set()  # (event key, action) recorded SUCCEEDED, acknowledged
        self.refused_in_outage: Counter[str] = Counter()
        self.ok_in_outage: Counter[str] = Counter()
        self.superseded = 0
        self.unexpected: list[str] = []

    def wholly_down(self, began: int) -> bool:
        """The call began and ended with no writable primary: after the kill, before the promotion."""
        return began == OUTAGE and self.phase == OUTAGE

    def refused(self, call: str, exc: InboxError, began: int) -> None:
        if not isinstance(exc, Unavailable):
            self.unexpected.append(f"{call}: {exc}")
        if self.wholly_down(began):
            self.refused_in_outage[call] += 1

    def answered(self, call: str, began: int) -> None:
        if self.wholly_down(began):
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
        acked, completed = len(self.acked), len(self.completions)
        return lambda: (
            len(self.acked) >= acked + ACKS_BETWEEN and len(self.completions) >= completed + COMPLETIONS_BETWEEN
        )

    def refused_again(self) -> bool:
        return all(self.refused_in_outage[c] >= REFUSALS_DURING for c in ("Accept", "Claim"))

    def describe(self) -> str:
        return (
            f"acked {len(self.acked)}, completed {len(self.completions)}, "
            f"refused in outage {dict(self.refused_in_outage)}, OK in outage {dict(self.ok_in_outage)}, "
            f"unexpected {self.unexpected[-3:]}"
        )


def request(ns: str, key: str) -> inbox_pb2.AcceptRequest:
    return accept_request(ns, key, "order.shipped", {"id": key, "parcels": len(key) % 4 + 1})


async def produce(
    books: Books, replicas: list[AsyncInboxClient], ns: str, rng: random.Random, stop: asyncio.Event
) -> None:
    """An edge: Accepts, single or batched, until `stop` and every refused event has been taken."""
    while not (stop.is_set() and not books.resend):
        batched = rng.random() < 0.5
        keys = books.take_keys(BATCH_SIZE if batched else 1)
        inbox = rng.choice(replicas)
        began = books.phase
        books.deliveries += len(keys)
        try:
            if batched:
                answer = await inbox.accept_batch([request(ns, key) for key in keys])
                outcomes = [r.outcome for r in answer.results]
            else:
                single = request(ns, keys[0])
                outcomes = [(await inbox.accept(ns, keys[0], single.event_type, {"id": keys[0]})).outcome]
        except InboxError as exc:
            books.refused("Accept", exc, began)
            books.resend.extend(keys)
            await asyncio.sleep(0.1)  # a provider's retry pause
            continue
        books.answered("Accept", began)
        books.acked.update(keys)
        books.accepted.update(k for k, o in zip(keys, outcomes, strict=True) if o == ACCEPTED)
        await asyncio.sleep(0.02)


async def until_answered(call: Callable[[], Awaitable[T]], books: Books, name: str, stop: asyncio.Event) -> T | None:
    """Calls again while UNAVAILABLE, until `stop`; None if the claim was taken over (ABORTED) or stopped."""
    while not stop.is_set():
        began = books.phase
        try:
            result = await call()
        except ClaimSuperseded:
            books.superseded += 1
            return None
        except InboxError as exc:
            books.refused(name, exc, began)
            await asyncio.sleep(0.25)
            continue
        books.answered(name, began)
        return result
    return None


async def claim(
    books: Books, inbox: AsyncInboxClient, ns: str, *, max_events: int, worker: str
) -> list[inbox_pb2.ClaimedEvent] | None:
    """One Claim; its fencing tokens filed under the era it began in. None when refused."""
    began = books.phase
    try:
        answer = await inbox.claim(namespaces=[ns], max_events=max_events, lease=LEASE, wait=0.5, worker_id=worker)
    except InboxError as exc:
        books.refused("Claim", exc, began)
        return None
    books.answered("Claim", began)
    # A Claim begun before the kill may be answered after the promotion (the client retries
    # UNAVAILABLE), its token then drawn from either primary: it is in neither era.
    era = began if began == books.phase or began != BEFORE else STRADDLING
    books.tokens[era].extend(event.fencing_token for event in answer.events)
    return list(answer.events)


async def work(
    books: Books, replicas: list[AsyncInboxClient], ns: str, rng: random.Random, stop: asyncio.Event
) -> None:
    """Claims until `stop`; for each event records an action outcome, then completes it, in the background."""
    finishing: set[asyncio.Task[None]] = set()

    async def finish(event: inbox_pb2.ClaimedEvent) -> None:
        action = action_name(event)
        recorded = await until_answered(
            lambda: rng.choice(replicas).record_action_outcome(event, action, SUCCEEDED, external_ref=event.event_key),
            books,
            "RecordActionOutcome",
            stop,
        )
        if recorded is None:
            return
        books.outcomes.add((event.event_key, action))
        done = await until_answered(lambda: rng.choice(replicas).complete(event), books, "Complete", stop)
        if done is not None:
            books.completions[event.event_key].add(event.claim_token)

    while not stop.is_set():
        if len(finishing) >= 4 * CLAIM_BATCH:
            await asyncio.wait(finishing, return_when=asyncio.FIRST_COMPLETED)
            continue
        events = await claim(books, rng.choice(replicas), ns, max_events=CLAIM_BATCH, worker="failover-worker")
        if events is None:
            await asyncio.sleep(0.1)
            continue
        for event in events:
            task = asyncio.create_task(finish(event))
            finishing.add(task)
            task.add_done_callback(finishing.discard)
    if finishing:
        await asyncio.wait(finishing)


async def listeners(url: str) -> int:
    """inboxd's LISTEN sessions on the cluster at `url` (by their name, or by their one statement)."""
    rows = await query(
        url,
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'inboxd-listener' OR query LIKE 'LISTEN %%'",
    )
    return int(rows[0][0])


async def sequence_state(url: str) -> tuple[int, int, bool]:
    [(last_value, log_cnt, is_called)] = await query(
        url, "SELECT last_value, log_cnt, is_called FROM inbox_fencing_tokens"
    )
    return int(last_value), int(log_cnt), bool(is_called)


async def until_claimed(
    books: Books, inbox: AsyncInboxClient, ns: str, keys: set[str], worker: str
) -> list[inbox_pb2.ClaimedEvent]:
    """Claims in `ns` until every one of `keys` is held (their old leases must expire first)."""
    held: dict[str, inbox_pb2.ClaimedEvent] = {}

    async def all_held() -> bool:
        for event in await claim(books, inbox, ns, max_events=len(keys), worker=worker) or []:
            held[event.event_key] = event
        return set(held) >= keys

    await eventually(all_held, lambda: f"claimed {sorted(held)} of {sorted(keys)}", within=60.0, every=0.1)
    return [held[key] for key in sorted(keys)]


@pytest.mark.parametrize(
    "scenario",
    [
        pytest.param(SYNCHRONOUS, id="synchronous"),
        pytest.param(ASYNCHRONOUS, id="asynchronous", marks=pytest.mark.failover_async),
    ],
)
async def test_a_failover_to_a_promoted_standby_under_load_loses_nothing_acknowledged(scenario: str) -> None:
    synchronous = scenario == SYNCHRONOUS
    tally = ledger.open_tally(scenario)
    rng = ledger.rng_for(scenario)
    ns, held_ns = namespace(scenario), namespace(f"{scenario} held")
    books = Books()
    stop_producing, stop_working = asyncio.Event(), asyncio.Event()

    async with replicated_pair(synchronous=synchronous) as pair:
        new_primary = pair.standby.conninfo
        async with serving(pair.url) as r0, serving(pair.url) as r1, client(r0.target) as c0, client(r1.target) as c1:
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
                await eventually(
                    books.progressed(),
                    lambda: f"the service acknowledges and completes: {books.describe()}",
                    within=60.0,
                )
                # Claims on the primary that their holder never finishes: the new primary must move past them.
                held_keys = {f"held-{i}" for i in range(HELD)}
                answer = await c0.accept_batch([request(held_ns, key) for key in sorted(held_keys)])
                assert all(r.outcome == ACCEPTED for r in answer.results)
                tally.deliveries += HELD
                stale = await until_claimed(books, c1, held_ns, held_keys, "doomed-worker")
                before_kill = await sequence_state(pair.primary.conninfo)

                # The standby falls behind; then the primary dies with whatever it has not shipped.
                cut_off_standby(await wal_sender(pair.primary))
                acked_in_sync = len(books.acked)

                async def behind() -> bool:
                    return len(books.acked) >= acked_in_sync + LAG_ACKS or await held_commits(pair.primary) >= LAG_HELD

                await eventually(behind, "the primary went on without its standby", within=60.0, every=0.02)
                held_at_death = await held_commits(pair.primary)
                frozen = freeze_primary(pair.primary)
                acked_unshipped = len(books.acked) - acked_in_sync
                books.phase = OUTAGE  # nothing begun from here on can reach the old primary
                await kill_frozen(pair.primary, frozen)
                await eventually(
                    books.refused_again,
                    lambda: f"Accepts and Claims are refused with no primary: {books.describe()}",
                    within=60.0,
                )
                books.phase = AFTER
                await asyncio.to_thread(promote, pair.standby)
                after_promotion = await sequence_state(new_primary)

                # No restart: the same servers find the new primary by themselves.
                await eventually(
                    books.progressed(),
                    lambda: f"the service acknowledges and completes on the new primary: {books.describe()}",
                    within=60.0,
                )

                async def listening_again() -> bool:
                    return await listeners(new_primary) >= REPLICAS

                await eventually(listening_again, "both replicas LISTEN on the new primary", within=60.0)

                successors = await until_claimed(books, c0, held_ns, held_keys, "successor-worker")
                for event in successors:
                    await c1.complete(event)
                    books.completions[event.event_key].add(event.claim_token)
                refusals = await refuse_stale_claims(c0, stale)

                stop_producing.set()
                await asyncio.wait_for(asyncio.gather(*producers), 60.0)

                async def settled() -> bool:
                    stored = await states(new_primary, ns)
                    return all(stored.get(key, "completed") == "completed" for key in books.produced)

                await eventually(settled, "every stored event completed", within=60.0, every=0.25)
            finally:
                stop_producing.set()
                stop_working.set()
                await asyncio.wait_for(asyncio.gather(*producers, *workers, return_exceptions=True), 60.0)

        stored = await states(new_primary, ns)
        completed_by = dict(
            await query(new_primary, "SELECT event_key, claim_token FROM inbox_events WHERE namespace = %s", (ns,))
        )
        actions = {
            (str(key), str(action)): str(state)
            for key, action, state in await query(
                new_primary, "SELECT event_key, action, state FROM inbox_actions WHERE namespace = %s", (ns,)
            )
        }
        held_stored = await states(new_primary, held_ns)

    old_era, new_era = books.tokens[BEFORE], books.tokens[OUTAGE] + books.tokens[AFTER]
    highest_before = max(old_era)
    backwards = sum(1 for token in new_era if token <= highest_before)
    # Each acknowledged Complete: the event is COMPLETED by that very claim (so two claims' Completes lose one).
    lost_completions = sum(
        1
        for key, tokens in books.completions.items()
        if key in stored
        for token in tokens
        if not (stored[key] == "completed" and completed_by[key] == token)
    )
    lost_outcomes = sum(1 for item in books.outcomes if actions.get(item) != "succeeded")

    tally.events += len(books.produced) + HELD
    tally.deliveries += books.deliveries
    tally.account(books.acked | held_keys, {*stored, *held_stored})
    tally.lost += lost_completions + lost_outcomes
    tally.extra(books.accepted)
    tally.duplicated += len(set(stored) - books.produced)
    tally.count_effects({key: len(tokens) for key, tokens in books.completions.items()})
    tally.note("acknowledged Completes missing", lost_completions)
    tally.note("acknowledged action outcomes missing", lost_outcomes)
    tally.note("events acknowledged with the standby cut off", acked_unshipped)
    tally.note("COMMITs held for the standby when the primary died", held_at_death)
    tally.note("Accept refused with no primary", books.refused_in_outage["Accept"])
    tally.note("Claim refused with no primary", books.refused_in_outage["Claim"])
    tally.note("Completes refused as superseded (ABORTED)", books.superseded)
    tally.note("dead primary's claims refused (ABORTED)", refusals)
    tally.note("highest fencing token before the kill", highest_before)
    tally.note("lowest after", min(new_era))
    tally.note("tokens after the kill at or below the highest before", backwards)
    tally.note("claimed across the kill (era unknown, not compared)", len(books.tokens[STRADDLING]))
    tally.note("sequence last_value on the primary before the cut-off", before_kill[0])
    tally.note("on the promoted standby", after_promotion[0])

    if not synchronous:
        tally.finished = True  # reported, not asserted: see docs/reliability.md
        return
    assert not books.unexpected, f"answers other than UNAVAILABLE: {books.unexpected[:5]}"
    assert not books.ok_in_outage, f"acknowledged with no primary: {dict(books.ok_in_outage)}"
    assert backwards == 0, f"{backwards} fencing tokens after the failover at or below {highest_before}"
    # The standby's copy of the sequence is at or beyond every token the primary had handed out.
    assert after_promotion[0] >= highest_before
    assert refusals == 3 * HELD
    assert books.acked == books.produced
    assert {k for k, s in stored.items() if s == "completed"} == books.produced
    assert held_stored == dict.fromkeys(held_keys, "completed")
    tally.close()


async def refuse_stale_claims(inbox: AsyncInboxClient, stale: list[inbox_pb2.ClaimedEvent]) -> int:
    """Every fenced call with a claim of the dead primary's era, on an event completed since: ABORTED."""
    refused = 0
    calls: list[Callable[[inbox_pb2.ClaimedEvent], Awaitable[object]]] = [
        inbox.complete,
        lambda event: inbox.renew_lease(event, lease=LEASE),
        lambda event: inbox.record_action_outcome(event, "receipt:stale", INTENDED),
    ]
    for event in stale:
        for call in calls:
            with pytest.raises(ClaimSuperseded):
                await call(event)
            refused += 1
    return refused
