"""Scenario 1: a duplicate storm makes one row and one job per logical event.

The same logical events are delivered again and again: one copy after another;
concurrently to one server; and through three replicas at once, as single
Accepts and as whole AcceptBatches that each replica receives in another
order. Copies differ the way a provider's retries do: another delivery id in
the metadata, another key order and whitespace in the JSON. Each logical event
must end as one row, answered ACCEPTED exactly once (every other copy
DUPLICATE, never CONFLICT), and make one job: draining the namespace claims
each event exactly once, and then finds nothing more.
"""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from collections import Counter
from typing import Any

from inboxd_client import AcceptOutcome, AsyncInboxClient, accept_request
from inboxd_client.v1 import inbox_pb2
from tests.reliability import ledger
from tests.reliability.rig import client, conflicts, namespace, serving, states

SCENARIO = "duplicate storm"
SEQUENTIAL_EVENTS, SEQUENTIAL_COPIES = 200, 3
CONCURRENT_EVENTS = 2_000  # four copies each: two to replica 0, one each to replicas 1 and 2
BATCHED_EVENTS, BATCH_SIZE = 6_000, 250  # each batch to all three replicas, in three orders
CALLS_IN_FLIGHT = 128
BATCHES_IN_FLIGHT = 4
EVENT_TYPE = "order.paid"
ACCEPTED = AcceptOutcome.ACCEPT_OUTCOME_ACCEPTED
DUPLICATE = AcceptOutcome.ACCEPT_OUTCOME_DUPLICATE


def document(key: str, n: int) -> dict[str, Any]:
    return {"id": key, "amount": n * 7 % 1000, "currency": "EUR", "lines": [{"sku": f"sku-{n % 13}", "qty": 1 + n % 3}]}


def render(doc: dict[str, Any], rng: random.Random) -> bytes:
    """One copy's bytes: the same JSON value, in another key order and spacing each time."""
    keys = list(doc)
    rng.shuffle(keys)
    separators = rng.choice([(",", ":"), (", ", ": "), (" ,", " : ")])
    return json.dumps({k: doc[k] for k in keys}, separators=separators).encode()


def copy_of(ns: str, key: str, n: int, rng: random.Random) -> inbox_pb2.AcceptRequest:
    return accept_request(
        ns, key, EVENT_TYPE, render(document(key, n), rng), metadata={"delivery_id": f"dlv_{uuid.uuid4().hex}"}
    )


class Storm:
    """Sends copies and keeps the books: every answer must be OK, and ACCEPTED once per key."""

    def __init__(self, tally: ledger.Tally) -> None:
        self.tally = tally
        self.accepted: Counter[str] = Counter()
        self.outcomes: Counter[int] = Counter()
        self.acknowledged: set[str] = set()
        self.limit = asyncio.Semaphore(CALLS_IN_FLIGHT)

    def answered(self, key: str, outcome: int) -> None:
        self.outcomes[outcome] += 1
        self.acknowledged.add(key)
        if outcome == ACCEPTED:
            self.accepted[key] += 1

    async def one(self, inbox: AsyncInboxClient, request: inbox_pb2.AcceptRequest) -> None:
        async with self.limit:
            answer = await inbox.accept(
                request.namespace,
                request.event_key,
                request.event_type,
                request.payload,
                metadata=dict(request.metadata),
            )
        self.tally.deliveries += 1
        self.answered(request.event_key, answer.outcome)

    async def batch(self, inbox: AsyncInboxClient, requests: list[inbox_pb2.AcceptRequest]) -> None:
        answer = await inbox.accept_batch(requests)
        self.tally.deliveries += len(requests)
        for request, result in zip(requests, answer.results, strict=True):
            self.answered(request.event_key, result.outcome)


async def drain(inbox: AsyncInboxClient, ns: str) -> Counter[str]:
    """Claims everything claimable in `ns`: how many jobs each key made."""
    jobs: Counter[str] = Counter()
    while True:
        answer = await inbox.claim(namespaces=[ns], max_events=100, lease=600.0, worker_id="storm-drain")
        if not answer.events:
            return jobs
        jobs.update(event.event_key for event in answer.events)


async def test_a_duplicate_storm_through_three_replicas_leaves_one_row_and_one_job_per_event(reliable_url: str) -> None:
    tally = ledger.open_tally(SCENARIO)
    rng = ledger.rng_for(SCENARIO)
    ns = namespace(SCENARIO)
    storm = Storm(tally)
    sequential = [f"seq-{i:05d}" for i in range(SEQUENTIAL_EVENTS)]
    concurrent = [f"con-{i:05d}" for i in range(CONCURRENT_EVENTS)]
    batched = [f"bat-{i:05d}" for i in range(BATCHED_EVENTS)]
    number = {key: n for n, key in enumerate([*sequential, *concurrent, *batched])}

    async with serving(reliable_url) as r0, serving(reliable_url) as r1, serving(reliable_url) as r2:
        async with client(r0.target) as c0, client(r1.target) as c1, client(r2.target) as c2:
            replicas = [c0, c1, c2]

            # One after another: the provider retries after each answer.
            for key in sequential:
                for _ in range(SEQUENTIAL_COPIES):
                    await storm.one(rng.choice(replicas), copy_of(ns, key, number[key], rng))

            # At once: four copies of each event race, two on one replica.
            copies = [(inbox, copy_of(ns, key, number[key], rng)) for key in concurrent for inbox in (c0, c0, c1, c2)]
            rng.shuffle(copies)
            await asyncio.gather(*(storm.one(inbox, request) for inbox, request in copies))

            # Whole batches, each to all three replicas at once, each replica in its own order.
            groups = [batched[i : i + BATCH_SIZE] for i in range(0, len(batched), BATCH_SIZE)]
            limit = asyncio.Semaphore(BATCHES_IN_FLIGHT)

            async def storm_batch(keys: list[str]) -> None:
                orders = []
                for _ in replicas:
                    order = list(keys)
                    rng.shuffle(order)
                    orders.append([copy_of(ns, key, number[key], rng) for key in order])
                async with limit:
                    await asyncio.gather(
                        *(storm.batch(inbox, reqs) for inbox, reqs in zip(replicas, orders, strict=True))
                    )

            await asyncio.gather(*(storm_batch(keys) for keys in groups))

            jobs = await drain(c1, ns)
            again = await drain(c2, ns)

    logical = set(number)
    stored = await states(reliable_url, ns)
    tally.events += len(logical)
    tally.account(storm.acknowledged, stored)
    # Beyond one per logical event: ACCEPTED answers, rows, jobs; a row under a key nobody sent.
    tally.extra(storm.accepted)
    tally.extra(jobs)
    tally.duplicated += len(set(stored) - logical) + sum(again.values())
    tally.note("ACCEPTED answers", storm.outcomes[ACCEPTED])
    tally.note("DUPLICATE answers", storm.outcomes[DUPLICATE])
    tally.note("jobs claimed", sum(jobs.values()))

    assert storm.acknowledged == logical
    assert set(stored) == logical, f"{len(set(stored) ^ logical)} keys differ between what was sent and what is stored"
    assert storm.accepted == Counter(dict.fromkeys(logical, 1)), "some event was ACCEPTED twice or never"
    assert set(storm.outcomes) == {ACCEPTED, DUPLICATE}, f"outcomes seen: {dict(storm.outcomes)}"
    assert storm.outcomes[DUPLICATE] == tally.deliveries - len(logical)
    assert await conflicts(reliable_url, ns) == 0, "a copy that differed only in form was taken for a conflict"
    assert jobs == Counter(dict.fromkeys(logical, 1)), "some event made more than one job, or none"
    assert not again, f"{sum(again.values())} extra jobs after the drain"
    tally.close()
