"""Scenario 3: a server SIGKILLed during Accept load loses nothing it acknowledged.

Many callers keep single Accepts and AcceptBatches flowing into an `inboxd
serve` process; the moment a seeded number of acknowledgements has arrived,
the process is SIGKILLed, with no await between that answer and the signal,
so calls are cut off at every stage: before their transaction, inside it,
and after its commit. Every event a caller saw acknowledged must be in the
database (read on a second connection before anything else runs). Every
event that was not acknowledged is sent again through a fresh server and is
taken: ACCEPTED if it never committed, DUPLICATE if it committed but its
answer was lost. The fresh server takes the next round's load and is killed
in turn.
"""

from __future__ import annotations

import asyncio
import signal
from collections import Counter

from inboxd_client import AcceptOutcome, AsyncInboxClient, InboxError, Unavailable, accept_request
from inboxd_client.v1 import inbox_pb2
from tests.harness import ServerProcess
from tests.reliability import ledger
from tests.reliability.rig import client, namespace, quiesced, states

SCENARIO = "crash before commit"
ROUNDS = 4
SINGLE_SENDERS = 48
BATCH_SENDERS = 4
BATCH_SIZE = 25
KILL_AFTER = (300, 1500)  # acknowledgements before the kill, drawn from the seed
ACCEPTED = AcceptOutcome.ACCEPT_OUTCOME_ACCEPTED
DUPLICATE = AcceptOutcome.ACCEPT_OUTCOME_DUPLICATE


def request(ns: str, key: str) -> inbox_pb2.AcceptRequest:
    return accept_request(ns, key, "invoice.paid", {"id": key, "amount": len(key)})


class Load:
    """Accept load on one server until it is killed; what was sent, acknowledged and refused."""

    def __init__(self, server: ServerProcess, ns: str, round_no: int, kill_after: int) -> None:
        self.server = server
        self.ns = ns
        self.round_no = round_no
        self.kill_after = kill_after
        self.sent: list[str] = []
        self.acked: set[str] = set()
        self.refused: dict[str, str] = {}
        self.killed = False

    def _answered(self, keys: list[str]) -> None:
        self.acked.update(keys)
        if not self.killed and len(self.acked) >= self.kill_after:
            # No await between the answer and the signal: other calls are mid-flight.
            assert self.server.proc is not None
            self.server.proc.send_signal(signal.SIGKILL)
            self.killed = True

    def _refused(self, keys: list[str], exc: InboxError) -> None:
        assert self.killed, f"refused before the kill: {exc}"
        for key in keys:
            self.refused[key] = exc.code.name

    async def singles(self, inbox: AsyncInboxClient, sender: int) -> None:
        i = 0
        while not self.killed:
            key = f"r{self.round_no}-s{sender:02d}-{i:05d}"
            i += 1
            self.sent.append(key)
            try:
                answer = await inbox.accept(self.ns, key, "invoice.paid", {"id": key, "amount": len(key)})
            except InboxError as exc:
                self._refused([key], exc)
                return
            assert answer.outcome == ACCEPTED, key
            self._answered([key])

    async def batches(self, inbox: AsyncInboxClient, sender: int) -> None:
        i = 0
        while not self.killed:
            keys = [f"r{self.round_no}-b{sender}-{i:05d}-{j:02d}" for j in range(BATCH_SIZE)]
            i += 1
            self.sent.extend(keys)
            try:
                answer = await inbox.accept_batch([request(self.ns, key) for key in keys])
            except InboxError as exc:
                self._refused(keys, exc)
                return
            assert [r.outcome for r in answer.results] == [ACCEPTED] * len(keys)
            self._answered(keys)

    async def run(self) -> None:
        async with client(self.server.target) as inbox:
            await asyncio.gather(
                *(self.singles(inbox, n) for n in range(SINGLE_SENDERS)),
                *(self.batches(inbox, n) for n in range(BATCH_SENDERS)),
            )
        assert self.server.proc is not None
        assert await asyncio.to_thread(self.server.proc.wait, 30.0) == -signal.SIGKILL


async def resend(target: str, ns: str, keys: list[str]) -> dict[str, int]:
    """Sends `keys` again, as single Accepts, through the server at `target`: key -> outcome."""
    limit = asyncio.Semaphore(64)
    async with client(target) as inbox:

        async def one(key: str) -> tuple[str, int]:
            async with limit:
                answer = await inbox.accept(ns, key, "invoice.paid", {"id": key, "amount": len(key)})
            return key, answer.outcome

        return dict(await asyncio.gather(*(one(key) for key in keys)))


async def test_acknowledged_events_survive_a_server_sigkill_during_accept_load(reliable_url: str) -> None:
    tally = ledger.open_tally(SCENARIO)
    rng = ledger.rng_for(SCENARIO)
    ns = namespace(SCENARIO)
    everything: set[str] = set()
    codes: Counter[str] = Counter()

    server = ServerProcess(database_url=reliable_url)
    await asyncio.to_thread(server.start)
    try:
        for round_no in range(ROUNDS):
            load = Load(server, ns, round_no, rng.randint(*KILL_AFTER))
            await load.run()
            tally.note("kills")
            # Read on a second connection before any other server runs, once the dead server's sessions are gone:
            # a COMMIT it had sent can still land after it died.
            at_death = set(await states(reliable_url, ns))
            await quiesced(reliable_url)
            stored = await states(reliable_url, ns)
            tally.note("committed after the server was dead", len(set(stored) - at_death))
            tally.account(load.acked, stored)
            missing = load.acked - set(stored)
            assert not missing, f"{len(missing)} acknowledged events are not stored: {sorted(missing)[:5]}"
            assert set(stored) <= everything | set(load.sent), "a row no caller sent"
            assert len(load.acked) + len(load.refused) == len(load.sent)
            assert load.refused, "the kill cut no call off, so nothing below is tested"
            codes.update(load.refused.values())

            # Everything not acknowledged is sent again through a fresh server, which then carries the next round.
            server = ServerProcess(database_url=reliable_url)
            await asyncio.to_thread(server.start)
            unacked = sorted(load.refused)
            outcomes = await resend(server.target, ns, unacked)
            committed_unanswered = {k for k in unacked if k in stored}
            tally.note("calls cut off by a kill", len(unacked))
            tally.note("committed but unanswered: resend DUPLICATE", len(committed_unanswered))
            tally.deliveries += len(load.sent) + len(unacked)
            tally.events += len(load.sent)
            everything.update(load.sent)
            # An ACCEPTED for a committed key would be a second row for one event.
            tally.duplicated += sum(1 for k in committed_unanswered if outcomes[k] == ACCEPTED)
            for key in unacked:
                assert outcomes[key] == (DUPLICATE if key in committed_unanswered else ACCEPTED), key
            after = await states(reliable_url, ns)
            tally.account(unacked, after)
    finally:
        await asyncio.to_thread(server.kill)

    # A killed server leaves its callers UNAVAILABLE (the connection is gone): nothing else, and never OK.
    assert set(codes) <= {Unavailable.code.name}, dict(codes)
    final = await states(reliable_url, ns)
    assert set(final) == everything
    tally.close()
