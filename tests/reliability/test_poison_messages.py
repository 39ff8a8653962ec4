"""Scenario 10: poison messages end in dead letters within max attempts, without holding healthy events back.

The server allows 3 attempts. Poison is accepted first, so it sits at the head
of the queue, then the healthy events. Three kinds of poison:

- malformed: the handler raises PermanentError, dead-lettered on attempt 1;
- crashing: the handler raises, retried with backoff, dead-lettered when
  Fail finds attempt 3 of 3 used;
- worker-killing: whoever claims it dies (here: a claimant that abandons it),
  so only lease expiry brings it back; the Claim after the third expired
  lease dead-letters it.

Every healthy event completes on its first attempt. Then the bug is fixed,
and each dead letter is replayed through InboxAdminService.Replay with a
reason: audited, back to PENDING with attempts reset, and completed by the
workers. Each event's effect happens exactly once.
"""

from __future__ import annotations

import asyncio
from collections import Counter

from inboxd_client import AsyncInboxClient, EventContext, PermanentError, Worker, accept_request
from tests.harness import eventually
from tests.reliability import ledger
from tests.reliability.rig import client, namespace, query, serving, states

SCENARIO = "poison messages"
MAX_ATTEMPTS = 3
HEALTHY = 200
POISON_EACH = 6
WORKER_LEASE = 2.0
KILLER_LEASE = 1.0
ORDER, EXPORT = "order.created", "report.export"
REPLAY_REASON = "reliability: parser fixed, replaying dead letters"


class Shop:
    """The handler's world: which payloads it can process yet, and the effects it has made."""

    def __init__(self) -> None:
        self.fixed = False
        self.effects: Counter[str] = Counter()

    async def handle(self, ctx: EventContext) -> None:
        kind = ctx.json()["kind"]
        if not self.fixed and kind == "malformed":
            raise PermanentError("the order has no line items")
        if not self.fixed and kind == "crashing":
            raise ValueError("division by zero in the tax table")
        self.effects[ctx.event_key] += 1


async def abandon_exports(inbox: AsyncInboxClient, ns: str, stop: asyncio.Event) -> int:
    """A claimant that dies on every export it takes: claims and never finishes. Answers its claims."""
    claims = 0
    while not stop.is_set():
        answer = await inbox.claim(namespaces=[ns], event_types=[EXPORT], max_events=10, lease=KILLER_LEASE, wait=0.5)
        claims += len(answer.events)
    return claims


async def test_poison_messages_are_dead_lettered_within_max_attempts_and_replayed_after_a_fix(
    reliable_url: str,
) -> None:
    tally = ledger.open_tally(SCENARIO)
    rng = ledger.rng_for(SCENARIO)
    ns = namespace(SCENARIO)
    malformed = [f"malformed-{i}" for i in range(POISON_EACH)]
    crashing = [f"crashing-{i}" for i in range(POISON_EACH)]
    killing = [f"killing-{i}" for i in range(POISON_EACH)]
    healthy = [f"order-{i:04d}" for i in range(HEALTHY)]
    poison = [*malformed, *crashing, *killing]
    everything = [*poison, *healthy]
    kinds = {**dict.fromkeys(malformed, "malformed"), **dict.fromkeys(crashing, "crashing")}
    kinds |= dict.fromkeys(killing, "killing") | dict.fromkeys(healthy, "healthy")
    settings = {"INBOXD_MAX_ATTEMPTS": str(MAX_ATTEMPTS), "INBOXD_BACKOFF_BASE": "50ms", "INBOXD_BACKOFF_CAP": "200ms"}
    shop = Shop()

    async with serving(reliable_url, **settings) as server, client(server.target) as inbox:
        head = list(poison)
        rng.shuffle(head)  # poison first, in a seeded order, then the healthy events behind it
        for batch in ([*head], healthy[: HEALTHY // 2], healthy[HEALTHY // 2 :]):
            answer = await inbox.accept_batch(
                [
                    accept_request(ns, k, EXPORT if kinds[k] == "killing" else ORDER, {"id": k, "kind": kinds[k]})
                    for k in batch
                ]
            )
            assert all(r.outcome for r in answer.results)
        tally.deliveries += len(everything)

        worker = Worker(
            inbox, shop.handle, namespaces=[ns], event_types=[ORDER], concurrency=4, lease=WORKER_LEASE, wait=0.5
        )
        stop_killer = asyncio.Event()
        killer = asyncio.create_task(abandon_exports(inbox, ns, stop_killer))
        run = asyncio.create_task(worker.run(handle_signals=False))
        try:

            async def settled() -> bool:
                found = await states(reliable_url, ns)
                return all(found.get(k) == "completed" for k in healthy) and all(
                    found.get(k) == "dead_lettered" for k in poison
                )

            await eventually(settled, "healthy events completed and poison dead-lettered", within=60.0, every=0.2)
            stop_killer.set()
            killer_claims = await asyncio.wait_for(killer, 10.0)

            rows = await query(
                reliable_url,
                "SELECT event_key, attempt, last_error, (SELECT count(*) FROM inbox_claims c"
                " WHERE c.namespace = e.namespace AND c.event_key = e.event_key)"
                " FROM inbox_events e WHERE namespace = %s",
                (ns,),
            )
            attempts = {str(k): int(a) for k, a, _, _ in rows}
            errors = {str(k): str(err or "") for k, _, err, _ in rows}
            claims = {str(k): int(n) for k, _, _, n in rows}

            # The fix ships; an operator replays the dead letters, with a reason.
            shop.fixed = True
            exports = Worker(
                inbox, shop.handle, namespaces=[ns], event_types=[EXPORT], concurrency=4, lease=WORKER_LEASE, wait=0.5
            )
            run_exports = asyncio.create_task(exports.run(handle_signals=False))
            for key in poison:
                await inbox.replay(ns, key, REPLAY_REASON)

            async def all_completed() -> bool:
                found = await states(reliable_url, ns)
                return all(found.get(k) == "completed" for k in everything)

            await eventually(all_completed, "every replayed event completed", within=60.0, every=0.2)
            exports.stop()
            await asyncio.wait_for(run_exports, 30.0)
        finally:
            stop_killer.set()
            worker.stop()
            await asyncio.wait_for(asyncio.gather(run, killer, return_exceptions=True), 30.0)

    audits = await query(
        reliable_url, "SELECT event_key, reason, state_before FROM inbox_replays WHERE namespace = %s", (ns,)
    )
    final = await states(reliable_url, ns)

    tally.events += len(everything)
    tally.account(everything, {k for k, s in final.items() if s == "completed"})
    tally.duplicated += len(set(final) - set(everything))
    tally.count_effects(shop.effects)
    tally.note("dead-lettered: malformed (PermanentError)", len(malformed))
    tally.note("dead-lettered: crashing (attempts exhausted by Fail)", len(crashing))
    tally.note("dead-lettered: worker-killing (attempts exhausted by lease expiry)", len(killing))
    tally.note("abandoned claims of worker-killing poison", killer_claims)
    tally.note("audited replays", len(audits))

    for key in malformed:
        assert (attempts[key], claims[key]) == (1, 1), key
    for key in crashing:
        assert (attempts[key], claims[key]) == (MAX_ATTEMPTS, MAX_ATTEMPTS), key
        assert "division by zero" in errors[key]
    for key in killing:
        assert (attempts[key], claims[key]) == (MAX_ATTEMPTS, MAX_ATTEMPTS), key
        assert "attempts exhausted" in errors[key]
    assert all((attempts[k], claims[k]) == (1, 1) for k in healthy), "a healthy event needed more than one attempt"
    assert sorted(str(k) for k, _, _ in audits) == sorted(poison)
    assert {(str(r), str(s)) for _, r, s in audits} == {(REPLAY_REASON, "dead_lettered")}
    assert shop.effects == Counter(dict.fromkeys(everything, 1))
    tally.close()
