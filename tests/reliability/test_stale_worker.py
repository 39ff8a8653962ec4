"""Scenario 7: a stale worker that resumes after its lease was taken over can change nothing.

Worker processes each claim an event with a 2 s lease and are frozen with
SIGSTOP, as a long GC pause or a stalled VM would freeze them. Their leases
expire; a second worker claims the events (higher fencing tokens) and writes
the business rows, fenced by its token. It completes half of the events at
once, inside its business transaction (`inboxd_complete()`), and holds the
other half mid-work with an INTENDED action. Then the stale workers are
thawed (SIGCONT) and try everything:

- their fenced business write (`... WHERE fence < :token`) matches no row;
- an unfenced business write in a transaction that also calls
  `inboxd_complete()` is rolled back with it (SQLSTATE IX409);
- RenewLease, INTENDED, Complete, Fail and Release are refused: ABORTED.

An action *outcome* from the stale claim is accepted: outcomes are facts about
the outside world, taken from any claim ever issued (DESIGN.md). The new
worker then finishes; every business row holds exactly its one write.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import psycopg

from inboxd_client import accept_request
from inboxd_client.v1 import inbox_pb2, types_pb2
from tests.harness import eventually
from tests.reliability import ledger
from tests.reliability.rig import PyProcess, client, execute, namespace, processes, query, serving, states
from tests.reliability.stale_worker import FENCED_WRITE, account_id

SCENARIO = "stale worker"
STALE = 6
LEASE = 2.0
ACCOUNTS_TABLE = """
CREATE TABLE IF NOT EXISTS reliability_accounts (
    id      text   PRIMARY KEY,
    balance bigint NOT NULL DEFAULT 0,
    fence   bigint NOT NULL DEFAULT 0
)
"""
REFUSED_CALLS = ("RenewLease", "INTENDED", "Complete", "Fail", "Release")


async def complete_with_business_write(url: str, event: inbox_pb2.ClaimedEvent) -> None:
    """The new owner's business write and completion, in one transaction."""
    async with await psycopg.AsyncConnection.connect(url) as conn, conn.transaction():
        cur = await conn.execute(
            FENCED_WRITE, {"id": account_id(event.namespace, event.event_key), "token": event.fencing_token}
        )
        assert cur.rowcount == 1
        await conn.execute("SELECT inboxd_complete(%s, %s, %s)", (event.namespace, event.event_key, event.claim_token))


def assert_refused_everywhere(key: str, result: dict[str, Any]) -> None:
    """What the stale worker heard back: nothing it wrote took hold, except the outcome it reported."""
    assert result["fenced_write_rows"] == 0, (key, result)
    assert result["complete_in_transaction"] == "IX409", (key, result)
    for call in REFUSED_CALLS:
        assert result[call] == "ABORTED", (key, call, result)
    assert result["outcome_SUCCEEDED"] == "OK", (key, result)


async def test_a_stale_worker_resumed_after_reassignment_is_refused_everywhere(
    reliable_url: str, tmp_path: Path
) -> None:
    tally = ledger.open_tally(SCENARIO)
    rng = ledger.rng_for(SCENARIO)
    ns = namespace(SCENARIO)
    keys = [f"acct-{i}" for i in range(STALE)]
    await query(reliable_url, ACCOUNTS_TABLE)
    for key in keys:
        await query(reliable_url, "INSERT INTO reliability_accounts (id) VALUES (%s)", (account_id(ns, key),))

    async with serving(reliable_url) as server, client(server.target) as owner, processes() as started:
        answer = await owner.accept_batch(
            [accept_request(ns, k, "account.credit", {"id": k, "amount": 1}) for k in keys]
        )
        acked = {k for k, r in zip(keys, answer.results, strict=True) if r.outcome}
        tally.deliveries += len(keys)

        stale = []
        for _ in keys:
            argv = ["-m", "tests.reliability.stale_worker", server.target, reliable_url, ns, str(LEASE)]
            proc = PyProcess(argv, tmp_path / "stale.log")
            started.append(proc)
            stale.append(await proc.start())
        claims = {}
        for proc in stale:
            claim = await proc.json_line("claimed ")
            claims[claim["key"]] = (proc, claim)
            proc.signal(signal.SIGSTOP)
        assert set(claims) == set(keys), "each stale worker should hold one event"

        # The takeover: only lease expiry can hand the events over, since the stale workers hold them.
        taken: dict[str, inbox_pb2.ClaimedEvent] = {}

        async def take_over() -> bool:
            got = await owner.claim(namespaces=[ns], max_events=STALE, lease=60.0, wait=2.0, worker_id="new-owner")
            taken.update({e.event_key: e for e in got.events})
            return len(taken) == STALE

        await eventually(take_over, "the new owner takes every event over", within=30.0, every=0.0)
        for key, event in taken.items():
            assert event.fencing_token > claims[key][1]["fencing_token"]
            assert event.attempt == 2

        order = list(keys)
        rng.shuffle(order)
        finished_first, held = order[: STALE // 2], order[STALE // 2 :]
        for key in finished_first:
            await complete_with_business_write(reliable_url, taken[key])
        for key in held:
            event = taken[key]
            written = await execute(
                reliable_url, FENCED_WRITE, {"id": account_id(ns, key), "token": event.fencing_token}
            )
            assert written == 1
            await owner.record_action_outcome(event, "notify:v1", types_pb2.ACTION_STATE_INTENDED)

        # Thaw the stale workers: they resume exactly where they stopped.
        results: dict[str, dict[str, Any]] = {}
        for proc, _ in claims.values():
            proc.signal(signal.SIGCONT)
            await proc.tell("resume")
        for key, (proc, _) in claims.items():
            results[key] = await proc.json_line("results ")

        for key in held:
            event = taken[key]
            await owner.record_action_outcome(event, "notify:v1", types_pb2.ACTION_STATE_SUCCEEDED, external_ref="n-1")
            await owner.complete(event)
        for proc in stale:
            await proc.stop()

    rows = await query(
        reliable_url,
        "SELECT id, balance, fence FROM reliability_accounts WHERE id = ANY(%s)",
        ([account_id(ns, k) for k in keys],),
    )
    accounts = {str(i): (int(b), int(f)) for i, b, f in rows}
    final = await states(reliable_url, ns)
    claim_rows = await query(
        reliable_url, "SELECT fencing_token, outcome FROM inbox_claims WHERE namespace = %s", (ns,)
    )
    claim_outcomes = {int(token): str(outcome) for token, outcome in claim_rows}

    tally.events += len(keys)
    tally.account(acked, {k for k, s in final.items() if s == "completed"})
    # Every write is +1 (the owner's fenced one) or +1000 (the stale unfenced one, which must roll back).
    tally.count_effects(
        {k: accounts[account_id(ns, k)][0] % 1000 + accounts[account_id(ns, k)][0] // 1000 for k in keys}
    )
    refused = sum(1 for r in results.values() for call in REFUSED_CALLS if r[call] == "ABORTED")
    tally.note("stale calls refused (ABORTED)", refused)
    tally.note("stale fenced writes matching no row", sum(1 for r in results.values() if r["fenced_write_rows"] == 0))
    tally.note(
        "stale transactions rolled back by inboxd_complete (IX409)",
        sum(1 for r in results.values() if r["complete_in_transaction"] == "IX409"),
    )
    tally.note(
        "stale action outcomes accepted (by design)", sum(1 for r in results.values() if r["outcome_SUCCEEDED"] == "OK")
    )

    for key, result in results.items():
        assert_refused_everywhere(key, result)
    for key in keys:
        assert accounts[account_id(ns, key)] == (1, taken[key].fencing_token), (key, accounts[account_id(ns, key)])
        assert claim_outcomes[claims[key][1]["fencing_token"]] == "expired"
        assert claim_outcomes[taken[key].fencing_token] == "completed"
    assert set(final.values()) == {"completed"}
    tally.close()
