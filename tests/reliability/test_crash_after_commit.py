"""Scenario 4: a server that dies after its commit but before its answer leaves the event findable.

To stand exactly in that gap, the scenario holds commits at PostgreSQL's door:
`synchronous_standby_names` names a standby that never comes, so a COMMIT is
flushed to the WAL and then waits (wait event `SyncRep`) before it is
visible or answered. With Accepts parked there, the `inboxd serve` process
is frozen with SIGSTOP, the gate is opened, and the commits complete while
the server cannot send a single answer. A second connection observes the
committed rows; then the frozen server is SIGKILLed. Its callers saw no
acknowledgement at all. Resent through a fresh server, every event that
committed is found (DUPLICATE, never a second row), and every event that
never reached the database is taken (ACCEPTED).

The cluster is the scenario's own (durable too): closing the gate holds
every writer on it.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator

import psycopg
import pytest

from inboxd.serving.embedded_pg import EmbeddedPostgres
from inboxd_client import AcceptOutcome, AsyncInboxClient, Unavailable, accept_request
from tests.harness import ServerProcess, eventually
from tests.reliability import ledger
from tests.reliability.rig import client, namespace, own_cluster, query, quiesced, serving, states

SCENARIO = "crash after commit"
ROUNDS = 3
SINGLES = 60
BATCHES, BATCH_SIZE = 3, 100
ACCEPTED = AcceptOutcome.ACCEPT_OUTCOME_ACCEPTED
DUPLICATE = AcceptOutcome.ACCEPT_OUTCOME_DUPLICATE
PHANTOM = "reliability_phantom_standby"


@pytest.fixture(scope="module")
async def gated_pg() -> AsyncIterator[EmbeddedPostgres]:
    async with own_cluster() as pg:
        await query(pg.conninfo, "CREATE TABLE reliability_gate_probe (n integer)")
        yield pg


async def sync_rep_waiters(url: str) -> set[int]:
    rows = await query(url, "SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep'")
    return {int(pid) for (pid,) in rows}


class CommitGate:
    """Holds every COMMIT on the cluster after its WAL flush, until opened."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.probe: asyncio.Task[None] | None = None

    async def close(self) -> None:
        await query(self.url, f"ALTER SYSTEM SET synchronous_standby_names = '{PHANTOM}'")
        await query(self.url, "SELECT pg_reload_conf()")
        # A probe write proves the gate holds before anything is sent: it parks in SyncRep.
        self.probe = asyncio.create_task(self._probe_write())
        await eventually(self._holding, "a probe COMMIT waits in SyncRep", within=15.0, every=0.05)

    async def _probe_write(self) -> None:
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            await conn.execute("INSERT INTO reliability_gate_probe VALUES (1)")

    async def _holding(self) -> bool:
        return bool(await sync_rep_waiters(self.url))

    async def open(self) -> None:
        await query(self.url, "ALTER SYSTEM RESET synchronous_standby_names")
        await query(self.url, "SELECT pg_reload_conf()")

        async def released() -> bool:
            return not await sync_rep_waiters(self.url)

        await eventually(released, "every held COMMIT went through", within=15.0, every=0.05)
        if self.probe is not None:
            await asyncio.wait_for(self.probe, 15.0)


async def parked_stable(url: str, *, polls: int = 5) -> None:
    """Waits until the set of COMMITs held at the gate has stopped changing (the calls have all landed)."""
    last: set[int] = set()
    same = 0

    async def settled() -> bool:
        nonlocal last, same
        now = await sync_rep_waiters(url)
        same = same + 1 if now == last else 0
        last = now
        return same >= polls

    await eventually(settled, "the held COMMITs settle", within=15.0, every=0.1)


async def test_a_request_repeated_after_a_crash_between_commit_and_answer_finds_the_existing_row(
    gated_pg: EmbeddedPostgres,
) -> None:
    tally = ledger.open_tally(SCENARIO)
    rng = ledger.rng_for(SCENARIO)
    url = gated_pg.conninfo
    ns = namespace(SCENARIO)
    gate = CommitGate(url)

    for round_no in range(ROUNDS):
        singles = [f"r{round_no}-s{i:03d}" for i in range(SINGLES)]
        batches = [[f"r{round_no}-b{b}-{i:03d}" for i in range(BATCH_SIZE)] for b in range(BATCHES)]
        keys = [*singles, *(k for batch in batches for k in batch)]

        server = ServerProcess(database_url=url)
        await asyncio.to_thread(server.start)
        assert server.proc is not None
        try:
            await gate.close()
            inbox = client(server.target, timeout=60.0)
            try:
                # One batch first, held at the gate on its own (a hundred commits the frozen server owes);
                # then the rest in a seeded order, singles and batches interleaved.
                calls = [asyncio.create_task(accept_many(inbox, ns, batches[0]))]
                await eventually(lambda: _has_parked(url), "the first batch's COMMIT is held", within=15.0, every=0.05)
                sends = [accept_one(inbox, ns, key) for key in singles] + [
                    accept_many(inbox, ns, b) for b in batches[1:]
                ]
                rng.shuffle(sends)
                calls += [asyncio.create_task(send) for send in sends]
                await parked_stable(url)

                server.proc.send_signal(signal.SIGSTOP)
                await gate.open()
                observed = set(await states(url, ns)) & set(keys)
                assert not any(call.done() for call in calls), "a frozen server answered"
                server.proc.send_signal(signal.SIGKILL)
                await asyncio.to_thread(server.proc.wait, 30.0)
                results = await asyncio.gather(*calls, return_exceptions=True)
                # A COMMIT that sat unread in a backend's socket buffer still lands after the kill.
                await quiesced(url)
                committed = set(await states(url, ns)) & set(keys)
                assert observed <= committed
            finally:
                await inbox.close()
        finally:
            await asyncio.to_thread(server.kill)

        # Nobody heard back: every call failed when the connection died.
        for result in results:
            assert isinstance(result, Unavailable), f"expected UNAVAILABLE, got {result!r}"
        assert observed, "no Accept committed behind the gate, so this round proves nothing"
        tally.note("committed behind a frozen server, never answered", len(committed))
        tally.note("of them, committed after the server was gone", len(committed - observed))
        tally.note("never reached the database", len(keys) - len(committed))

        async with serving(url) as fresh, client(fresh.target) as inbox:
            outcomes: dict[str, int] = {}
            for key in singles:
                outcomes[key] = (await inbox.accept(ns, key, "invoice.paid", payload(key))).outcome
            for batch in batches:
                answer = await inbox.accept_batch([accept_request(ns, k, "invoice.paid", payload(k)) for k in batch])
                outcomes.update(zip(batch, (r.outcome for r in answer.results), strict=True))

        tally.events += len(keys)
        tally.deliveries += 2 * len(keys)
        tally.duplicated += sum(1 for k in committed if outcomes[k] != DUPLICATE)
        for key in keys:
            assert outcomes[key] == (DUPLICATE if key in committed else ACCEPTED), key
        tally.account(keys, await states(url, ns))

    tally.close()


def payload(key: str) -> dict[str, object]:
    return {"id": key, "amount": len(key)}


async def _has_parked(url: str) -> bool:
    return len(await sync_rep_waiters(url)) >= 2  # the probe and at least one Accept


async def accept_one(inbox: AsyncInboxClient, ns: str, key: str) -> None:
    await inbox.accept(ns, key, "invoice.paid", payload(key))


async def accept_many(inbox: AsyncInboxClient, ns: str, keys: list[str]) -> None:
    await inbox.accept_batch([accept_request(ns, key, "invoice.paid", payload(key)) for key in keys])
