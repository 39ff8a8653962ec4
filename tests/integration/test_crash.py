"""An acknowledged Accept survives a SIGKILL of inboxd right after the answer.

`inboxd serve` runs as a subprocess against the session's PostgreSQL. Sixty-four callers keep Accepts
flowing; the moment the 300th answer arrives the process is SIGKILLed, with the other callers' calls
still in flight (group commit answers many at once, so a fixed burst could all be answered before the
kill). Every acknowledged event must be in the table, and every other one can simply be sent again.
"""

from __future__ import annotations

import asyncio
import signal

import grpc

from inboxd.store.database import Database
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.harness import ServerProcess
from tests.integration.helpers import accept_request
from tests.integration.procs import stored_keys

ACCEPTED = inbox_pb2.ACCEPT_OUTCOME_ACCEPTED
DUPLICATE = inbox_pb2.ACCEPT_OUTCOME_DUPLICATE
SENDERS = 64
KILL_AT = 300
CALL_DEADLINE = 30.0


async def test_every_event_acknowledged_before_a_sigkill_is_stored_and_the_rest_can_be_sent_again(
    migrated_url: str, db: Database, ns: str
) -> None:
    first = ServerProcess(database_url=migrated_url)
    await asyncio.to_thread(first.start)
    sent: list[str] = []
    acked: list[str] = []
    refused: dict[str, grpc.StatusCode] = {}
    killed = False
    try:
        assert first.proc is not None
        proc = first.proc
        async with grpc.aio.insecure_channel(first.target) as channel:
            await asyncio.wait_for(channel.channel_ready(), CALL_DEADLINE)
            inbox = InboxServiceStub(channel)

            async def sender(n: int) -> None:
                nonlocal killed
                i = 0
                while not killed:
                    key = f"evt-{n:02d}-{i:05d}"
                    i += 1
                    sent.append(key)
                    try:
                        answer = await inbox.Accept(accept_request(ns, key), timeout=CALL_DEADLINE)
                    except grpc.aio.AioRpcError as exc:
                        assert killed, f"{key} failed before the kill: {exc.code()}: {exc.details()}"
                        refused[key] = exc.code()
                        return
                    assert answer.outcome == ACCEPTED, key
                    acked.append(key)
                    if len(acked) == KILL_AT:
                        # No await between the answer and the signal.
                        proc.send_signal(signal.SIGKILL)
                        killed = True

            await asyncio.gather(*(sender(n) for n in range(SENDERS)))
        assert await asyncio.to_thread(proc.wait, 30.0) == -signal.SIGKILL
    finally:
        first.kill()

    assert killed
    assert len(acked) >= KILL_AT
    assert len(acked) + len(refused) == len(sent)
    # A killed server leaves its callers UNAVAILABLE (connection lost); nothing else, and never OK.
    assert set(refused.values()) <= {grpc.StatusCode.UNAVAILABLE}, refused
    stored = await stored_keys(db, ns)
    missing = set(acked) - stored
    assert not missing, f"{len(missing)} acknowledged events are not in inbox_events: {sorted(missing)[:10]}"
    assert stored <= set(acked) | set(refused)
    assert refused, "the kill was meant to cut some calls off; none was, so the resend below proves nothing"

    # A fresh server takes every unacknowledged event again: new if it never committed, a duplicate if it
    # committed just before the kill. Either way the edge gets its 2xx; never an error.
    second = ServerProcess(database_url=migrated_url)
    await asyncio.to_thread(second.start)
    try:
        async with grpc.aio.insecure_channel(second.target) as channel:
            inbox = InboxServiceStub(channel)
            resent = sorted(refused)
            answers = await asyncio.gather(
                *(inbox.Accept(accept_request(ns, key), timeout=CALL_DEADLINE) for key in resent)
            )
            for key, answer in zip(resent, answers, strict=True):
                assert answer.outcome == (DUPLICATE if key in stored else ACCEPTED), key
            again = await inbox.Accept(accept_request(ns, acked[-1]), timeout=CALL_DEADLINE)
            assert again.outcome == DUPLICATE
        assert await asyncio.to_thread(second.terminate) == 0
    finally:
        second.kill()
    assert await stored_keys(db, ns) == set(sent)
