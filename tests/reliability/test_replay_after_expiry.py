"""Scenario 9: a redelivery after the dedupe window behaves as docs/operations.md says.

Events are processed with an external action on the ledger and COMPLETED;
beside them sit events that are PENDING, PROCESSING and DEAD_LETTERED, and one
completed event carries an operator's replay audit. Retention runs through
the store's own function, scoped to the scenario's namespace, with a clock
moved far ahead:

- inside the window (just before INBOXD_RETENTION, 7 d, has passed), and after
  only the payloads were dropped, a redelivery is DUPLICATE;
- once the pass has deleted the COMPLETED rows, their claims and their action
  ledger are gone too, the replay audit stays, and the open and dead-lettered
  events are untouched; a redelivery is then a NEW event (ACCEPTED), claimed
  as attempt 1 with an empty ledger, and its action gets a NEW idempotency
  key: from here on, not doing the effect twice rests on the downstream
  system's own memory (docs/reliability.md says so).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from inboxd.domain.operator_views import RetentionCounts
from inboxd.store.retention import apply_retention
from inboxd_client import AcceptOutcome, AsyncInboxClient, accept_request
from inboxd_client.v1 import inbox_pb2, types_pb2
from tests.reliability import ledger
from tests.reliability.rig import client, namespace, query, serving, states

SCENARIO = "replay after expiry"
COMPLETED = 100
OPEN_EACH = 5  # events left PENDING, PROCESSING and DEAD_LETTERED each
RETENTION = timedelta(days=7)
PAYLOAD_RETENTION = timedelta(days=1)
ACTION = "send-receipt:v1"
ACCEPTED = AcceptOutcome.ACCEPT_OUTCOME_ACCEPTED
DUPLICATE = AcceptOutcome.ACCEPT_OUTCOME_DUPLICATE


def request(ns: str, key: str) -> inbox_pb2.AcceptRequest:
    return accept_request(ns, key, "charge.succeeded", {"id": key, "amount": 4200})


async def claim_all(inbox: AsyncInboxClient, ns: str, count: int) -> list[inbox_pb2.ClaimedEvent]:
    claimed: list[inbox_pb2.ClaimedEvent] = []
    while len(claimed) < count:
        answer = await inbox.claim(namespaces=[ns], max_events=min(100, count - len(claimed)), lease=300.0, wait=1.0)
        assert answer.events, f"claimed {len(claimed)} of {count}"
        claimed.extend(answer.events)
    return claimed


async def redeliver(inbox: AsyncInboxClient, ns: str, keys: list[str]) -> list[int]:
    answer = await inbox.accept_batch([request(ns, key) for key in keys])
    return [r.outcome for r in answer.results]


async def retention_at(url: str, ns: str, now: datetime, *, payloads: bool = False) -> RetentionCounts:
    """One pass as of `now` over `ns` only; tried again while a replica's own pass holds the lock (bounded)."""
    for _ in range(200):
        counts = await apply_retention(
            url, retention=RETENTION, payload_retention=PAYLOAD_RETENTION if payloads else None, now=now, namespace=ns
        )
        if counts is not None:
            return counts
        await asyncio.sleep(0.05)
    raise AssertionError("the retention lock stayed taken")


async def test_a_redelivery_after_retention_deleted_the_row_is_a_new_event_as_documented(reliable_url: str) -> None:
    tally = ledger.open_tally(SCENARIO)
    ns = namespace(SCENARIO)
    done = [f"charge-{i:03d}" for i in range(COMPLETED)]
    pending = [f"pending-{i}" for i in range(OPEN_EACH)]
    processing = [f"processing-{i}" for i in range(OPEN_EACH)]
    dead = [f"dead-{i}" for i in range(OPEN_EACH)]
    everything = [*done, *pending, *processing, *dead]

    async with serving(reliable_url) as server, client(server.target) as inbox:
        first = await redeliver(inbox, ns, [*done, *processing, *dead])
        assert set(first) == {ACCEPTED}
        tally.deliveries += len(first)
        # Completed, with an external action on the ledger; held; dead-lettered.
        old_keys: dict[str, str] = {}
        for event in await claim_all(inbox, ns, len(first)):
            if event.event_key in done:
                intended = await inbox.record_action_outcome(event, ACTION, types_pb2.ACTION_STATE_INTENDED)
                old_keys[event.event_key] = intended.action.idempotency_key
                await inbox.record_action_outcome(event, ACTION, types_pb2.ACTION_STATE_SUCCEEDED, external_ref="ch_1")
                await inbox.complete(event)
            elif event.event_key in dead:
                await inbox.fail(event, "unprocessable", permanent=True)
        # Delayed a day: PENDING throughout, never claimable while the scenario runs.
        tomorrow = datetime.now(UTC) + timedelta(days=1)
        later = await inbox.accept_batch(
            [
                accept_request(ns, k, "charge.succeeded", {"id": k, "amount": 4200}, available_at=tomorrow)
                for k in pending
            ]
        )
        assert {r.outcome for r in later.results} == {ACCEPTED}
        tally.deliveries += len(pending)
        # An operator's audited replay of one completed event, which then completes again.
        await inbox.replay(ns, done[0], "reliability: audit trail must outlive retention")
        [again] = await claim_all(inbox, ns, 1)
        assert again.event_key == done[0] and [a.state for a in again.actions] == [types_pb2.ACTION_STATE_SUCCEEDED]
        await inbox.complete(again)

        acked = set(everything)
        tally.events += len(everything)
        tally.account(acked, await states(reliable_url, ns))
        [(latest,)] = await query(
            reliable_url,
            "SELECT max(completed_at) FROM inbox_events WHERE namespace = %s AND state = 'completed'",
            (ns,),
        )
        assert isinstance(latest, datetime)

        # Inside the window: a retention pass deletes nothing, a redelivery is a duplicate.
        inside = await retention_at(reliable_url, ns, latest + RETENTION - timedelta(minutes=1))
        assert inside.rows_deleted == 0
        outcomes = await redeliver(inbox, ns, done)
        tally.deliveries += len(done)
        tally.duplicated += outcomes.count(ACCEPTED)
        assert set(outcomes) == {DUPLICATE}
        # Payloads dropped, rows kept: still a duplicate (the key is what dedupes).
        dropped = await retention_at(reliable_url, ns, latest + 2 * PAYLOAD_RETENTION, payloads=True)
        assert (dropped.rows_deleted, dropped.payloads_dropped) == (0, COMPLETED)
        outcomes = await redeliver(inbox, ns, done)
        tally.deliveries += len(done)
        tally.duplicated += outcomes.count(ACCEPTED)
        assert set(outcomes) == {DUPLICATE}

        # Past the window: the COMPLETED rows go, with their claims and action ledger.
        past = await retention_at(reliable_url, ns, latest + RETENTION + timedelta(minutes=1))
        assert past.rows_deleted == COMPLETED
        left = await states(reliable_url, ns)
        assert left == {
            **dict.fromkeys(pending, "pending"),
            **dict.fromkeys(processing, "processing"),
            **dict.fromkeys(dead, "dead_lettered"),
        }, "retention touched an event that was not COMPLETED"
        for table, count in (
            ("inbox_actions", "SELECT count(*) FROM inbox_actions WHERE namespace = %s AND event_key = ANY(%s)"),
            ("inbox_claims", "SELECT count(*) FROM inbox_claims WHERE namespace = %s AND event_key = ANY(%s)"),
        ):
            [(rows,)] = await query(reliable_url, count, (ns, done))
            assert rows == 0, f"{table} kept rows of deleted events"
        [(audits,)] = await query(reliable_url, "SELECT count(*) FROM inbox_replays WHERE namespace = %s", (ns,))
        assert audits == 1, "the replay audit must outlive the row"

        # The documented boundary: a redelivery now is a new event, processed again from scratch.
        outcomes = await redeliver(inbox, ns, done)
        tally.deliveries += len(done)
        assert set(outcomes) == {ACCEPTED}
        fresh_keys: dict[str, str] = {}
        for event in await claim_all(inbox, ns, COMPLETED):
            assert event.attempt == 1 and not event.actions, event.event_key
            intended = await inbox.record_action_outcome(event, ACTION, types_pb2.ACTION_STATE_INTENDED)
            fresh_keys[event.event_key] = intended.action.idempotency_key
            await inbox.complete(event)
        assert set(fresh_keys) == set(done)
        assert all(fresh_keys[k] != old_keys[k] for k in done), "an idempotency key survived its row"

    tally.note("redeliveries inside the window (DUPLICATE)", 2 * COMPLETED)
    tally.note("COMPLETED rows deleted by retention", past.rows_deleted)
    tally.note("redeliveries after deletion (ACCEPTED, new events by policy)", COMPLETED)
    tally.note("new idempotency keys minted after deletion", len(fresh_keys))
    tally.note("open and dead-lettered events kept", len(left))
    tally.close()
