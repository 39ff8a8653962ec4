"""Long-polling Claims: woken by an Accept on this server or another, never
leaving events claimed by a caller who went away, and costing the database
next to nothing while they wait.

The quiet server has its poller turned off, so a waiting Claim that returns
before its wait ends can only have been woken by a signal.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest

from inboxd.config.settings import Settings
from inboxd.config.tokens import Scope, TokenRegistry, entry_toml, new_token
from inboxd.domain.vocabulary import ClaimRequest, EventKey, Namespace, NewEvent
from inboxd.runtime.wakeups import WaitFilter
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd.usecases.inbox import Inbox
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import NO_FALLBACK, NO_RESCUER
from tests.harness import ServerProcess, eventually
from tests.integration.helpers import accept_request, read_event, seconds

LONG_WAIT = 50.0


@pytest.fixture(scope="module")
async def quiet(quiet_server: RunningServer) -> AsyncIterator[InboxServiceStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{quiet_server.port}") as chan:
        yield InboxServiceStub(chan)


def waiting_claim(stub: InboxServiceStub, ns: str) -> Any:
    return stub.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], wait=seconds(LONG_WAIT)), timeout=LONG_WAIT + 5)


async def test_an_accept_on_the_same_server_wakes_a_waiting_claim(
    quiet: InboxServiceStub, quiet_server: RunningServer, ns: str
) -> None:
    call = waiting_claim(quiet, ns)
    await eventually(lambda: len(quiet_server.inbox.bus) > 0, "the claim to wait")
    await quiet.Accept(accept_request(ns, "wake-me"))
    answer = await asyncio.wait_for(call, LONG_WAIT / 2)
    assert [e.event_key for e in answer.events] == ["wake-me"]


async def test_an_accept_on_another_server_process_wakes_a_waiting_claim(
    quiet: InboxServiceStub, quiet_server: RunningServer, migrated_url: str, ns: str
) -> None:
    other = await asyncio.to_thread(ServerProcess(database_url=migrated_url).start)
    try:
        call = waiting_claim(quiet, ns)
        await eventually(lambda: len(quiet_server.inbox.bus) > 0, "the claim to wait")
        async with grpc.aio.insecure_channel(other.target) as chan:
            await InboxServiceStub(chan).Accept(accept_request(ns, "from-afar"))
        answer = await asyncio.wait_for(call, LONG_WAIT / 2)
        assert [e.event_key for e in answer.events] == ["from-afar"]
    finally:
        other.kill()


async def test_a_waiting_claim_is_not_woken_by_events_it_does_not_want(
    quiet: InboxServiceStub, quiet_server: RunningServer, ns: str
) -> None:
    call = waiting_claim(quiet, ns)
    await eventually(lambda: len(quiet_server.inbox.bus) > 0, "the claim to wait")
    await quiet.Accept(accept_request(ns + "-elsewhere", "not-mine"))
    await quiet.Accept(accept_request(ns, "mine"))
    answer = await asyncio.wait_for(call, LONG_WAIT / 2)
    assert [e.event_key for e in answer.events] == ["mine"]


async def test_a_cancelled_wait_leaves_nothing_claimed(
    quiet: InboxServiceStub, quiet_server: RunningServer, db: Database, ns: str
) -> None:
    call = waiting_claim(quiet, ns)
    await eventually(lambda: len(quiet_server.inbox.bus) > 0, "the claim to wait")
    call.cancel()
    await eventually(lambda: len(quiet_server.inbox.bus) == 0, "the server to drop the cancelled wait")
    await quiet.Accept(accept_request(ns, "k"))
    row = await read_event(db, ns, "k")
    assert (row["state"], row["attempt"]) == ("pending", 0)


async def test_a_wait_longer_than_the_deadline_answers_empty_before_it(quiet: InboxServiceStub, ns: str) -> None:
    answer = await quiet.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], wait=seconds(30)), timeout=1.0)
    assert list(answer.events) == []


async def test_a_claim_cancelled_mid_transaction_releases_what_it_took(
    quiet_server: RunningServer, db: Database, ns: str
) -> None:
    inbox = quiet_server.inbox
    await inbox.accept([_event(ns, "k")])
    locked = asyncio.Event()
    unlock = asyncio.Event()

    async def hold_table(conn: Any) -> None:
        # Blocks the claim's FOR UPDATE, so the cancellation lands mid-transaction.
        await conn.execute("LOCK TABLE inbox_events IN EXCLUSIVE MODE")
        locked.set()
        await unlock.wait()

    holder = asyncio.create_task(db.run(hold_table))
    await locked.wait()
    request = ClaimRequest((ns,), (), 1, timedelta(seconds=30), timedelta(0), "w")
    claim = asyncio.create_task(inbox.claim(request))
    await asyncio.sleep(0.2)  # let the claim reach the lock
    claim.cancel()
    unlock.set()
    await holder
    with pytest.raises(asyncio.CancelledError):
        await claim

    async def released() -> bool:
        row = await read_event(db, ns, "k")
        return bool(row["state"] == "pending" and row["fencing_token"] is not None)

    await eventually(released, "the orphaned claim to be released", within=10)
    row = await read_event(db, ns, "k")
    assert row["attempt"] == 0


def _event(ns: str, key: str) -> Any:
    return NewEvent(namespace=Namespace(ns), event_key=EventKey(key), event_type="test.event", payload=b"{}")


async def _transactions(db: Database) -> int:
    async def work(conn: Any) -> int:
        cur = await conn.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()"
        )
        row = await cur.fetchone()
        return int(row[0])

    count: int = await db.run(work, transaction=False)
    return count


async def test_a_thousand_idle_waiting_claims_cost_a_handful_of_transactions_a_second(db: Database, ns: str) -> None:
    """Waiters that ask again as soon as their wait ends, as workers do: neither the asking again nor the
    end of a wait is a look of its own while the poller finds nothing.

    Counted in pg_stat_database, which backends report up to 10 s late: settle first, then count.
    """
    waiters = 1000
    running = await start_server(
        Settings(listen="127.0.0.1:0", max_waiting_claims_per_caller=2 * waiters, rescue_interval=NO_RESCUER), db
    )
    poller = running.inbox._poller
    received: list[str] = []
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as chan:
            stub = InboxServiceStub(chan)

            async def worker() -> None:
                while True:
                    answer = await stub.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], wait=seconds(3)), timeout=30)
                    received.extend(e.event_key for e in answer.events)

            workers = [asyncio.create_task(worker()) for _ in range(waiters)]
            try:
                await eventually(lambda: len(running.inbox.bus) >= waiters * 9 // 10, "the claims to wait", within=30)
                await asyncio.sleep(11)  # the start-up's own transactions reach the statistics
                looks_before, spared_before = poller.looks, poller.spared
                before = await _transactions(db)
                started = asyncio.get_running_loop().time()
                await asyncio.sleep(4)
                counted = await _transactions(db) - before
                window = asyncio.get_running_loop().time() - started
                assert poller.looks > looks_before, "the poller never looked on the waiters' behalf"
                assert counted <= 10 * window, f"{counted} transactions in {window:.1f} s with {waiters} idle waiters"
                assert poller.spared > spared_before, "no waiter asked again in the window"
                # Still awake: one Accept answers exactly one of them.
                await stub.Accept(accept_request(ns, "the-one"))
                await eventually(lambda: bool(received), "a waiting claim to be answered")
                assert received == ["the-one"]
            finally:
                for task in workers:
                    task.cancel()
                await asyncio.gather(*workers, return_exceptions=True)
    finally:
        await running.stop(1.0)


async def test_a_wake_up_reaches_the_waiter_whose_token_may_claim_the_event(
    db: Database, ns: str, tmp_path: Any
) -> None:
    grants = {"elsewhere": ["nobody-here/*"], "eligible": [ns], "edge": ["*"]}
    scopes = {"elsewhere": [Scope.WORK], "eligible": [Scope.WORK], "edge": [Scope.ACCEPT]}
    tokens = {name: new_token() for name in grants}
    path = tmp_path / "tokens.toml"
    path.write_text("\n".join(entry_toml(n, tokens[n], scopes[n], grants[n]) for n in grants))
    settings = Settings(listen="127.0.0.1:0", tokens_file=path, rescue_interval=NO_RESCUER)
    running = await start_server(settings, db, registry=TokenRegistry(path))
    running.inbox.fallback_poll_seconds = NO_FALLBACK
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as chan:
            stub = InboxServiceStub(chan)

            def bearer(name: str) -> tuple[tuple[str, str]]:
                return (("authorization", f"Bearer {tokens[name]}"),)

            # The restricted worker waits first: the oldest waiter, and no namespace named.
            restricted = stub.Claim(
                inbox_pb2.ClaimRequest(event_types=["test.event"], wait=seconds(LONG_WAIT)),
                metadata=bearer("elsewhere"),
                timeout=LONG_WAIT + 5,
            )
            await eventually(lambda: len(running.inbox.bus) == 1, "the restricted claim to wait")
            eligible = stub.Claim(
                inbox_pb2.ClaimRequest(wait=seconds(LONG_WAIT)), metadata=bearer("eligible"), timeout=LONG_WAIT + 5
            )
            await eventually(lambda: len(running.inbox.bus) == 2, "the eligible claim to wait")
            await stub.Accept(accept_request(ns, "for-the-eligible"), metadata=bearer("edge"))
            answer = await asyncio.wait_for(eligible, LONG_WAIT / 2)
            assert [e.event_key for e in answer.events] == ["for-the-eligible"]
            assert not restricted.done()
            restricted.cancel()
    finally:
        await running.stop(1.0)


async def test_a_waiter_that_returns_holding_other_events_passes_its_wake_up_on(
    quiet_server: RunningServer, db: Database, ns: str
) -> None:
    inbox = quiet_server.inbox
    any_type = asyncio.create_task(inbox.claim(_waiting(ns, ())))
    await eventually(lambda: len(inbox.bus) == 1, "the first claim to wait")
    paid_only = asyncio.create_task(inbox.claim(_waiting(ns, ("order.paid",))))
    await eventually(lambda: len(inbox.bus) == 2, "the second claim to wait")

    async def older_event_nobody_announced(conn: Any) -> None:
        await conn.execute(
            "INSERT INTO inbox_events (namespace, event_key, event_type, payload, accepted_at, available_at,"
            " due_at, updated_at) VALUES (%s, 'unannounced', 'order.refunded', '{}', now() - interval '1 minute',"
            " now() - interval '1 minute', now() - interval '1 minute', now())",
            (ns,),
        )

    await db.run(older_event_nobody_announced)
    paid = _event(ns, "paid")
    await inbox.accept([NewEvent(paid.namespace, paid.event_key, "order.paid", b"{}")])
    # The oldest waiter takes the wake-up, looks, and leaves with the older, unannounced event.
    first = await asyncio.wait_for(any_type, LONG_WAIT / 2)
    assert [e.event_key for e in first.events] == ["unannounced"]
    # Its wake-up was for order.paid: the other waiter gets it.
    second = await asyncio.wait_for(paid_only, LONG_WAIT / 2)
    assert [e.event_key for e in second.events] == ["paid"]


def _waiting(ns: str, event_types: tuple[str, ...]) -> ClaimRequest:
    return ClaimRequest((ns,), event_types, 1, timedelta(seconds=30), timedelta(seconds=LONG_WAIT), "w")


# A waiting Claim skips its own look while the poller's last look found nothing due for its
# filter and no wake-up it wants came since. The quiet server's poller looks only when told
# to, so in these tests a Claim that wrongly skipped would wait out its whole wait.


async def _poll_with_nobody_left_waiting(inbox: Inbox, ns: str) -> WaitFilter:
    """One poller look while a waiter like the Claims to come waits, then that waiter leaves."""
    # A listener that starts listening makes everyone look again: let it, first.
    await eventually(lambda: inbox.signals is None or inbox.signals.listening, "the replica signals to listen")
    holder = inbox.bus.register([ns], [])
    await inbox._poller.look()
    inbox.bus.unregister(holder)
    assert inbox._poller.nothing_due_for(holder.filter), "the poller found something due in a fresh namespace"
    return holder.filter


async def test_an_event_another_replica_accepts_after_the_poll_is_claimed_by_the_next_waiting_claim(
    quiet: InboxServiceStub, quiet_server: RunningServer, migrated_url: str, ns: str
) -> None:
    inbox = quiet_server.inbox
    poller = inbox._poller
    other = await asyncio.to_thread(ServerProcess(database_url=migrated_url).start)
    try:
        async with grpc.aio.insecure_channel(other.target) as chan:
            afar = InboxServiceStub(chan)
            # The signal arrives while nobody here waits; the Claim comes after it.
            wait_filter = await _poll_with_nobody_left_waiting(inbox, ns)
            await afar.Accept(accept_request(ns, "before-the-claim"))
            await eventually(lambda: not poller.nothing_due_for(wait_filter), "the other replica's signal")
            answer = await asyncio.wait_for(waiting_claim(quiet, ns), LONG_WAIT / 2)
            assert [e.event_key for e in answer.events] == ["before-the-claim"]

            # The Claim skips its look, then the signal arrives: it wakes the Claim.
            await _poll_with_nobody_left_waiting(inbox, ns)
            spared = poller.spared
            call = waiting_claim(quiet, ns)
            await eventually(lambda: poller.spared > spared, "the claim to skip its look")
            await afar.Accept(accept_request(ns, "after-the-claim"))
            answer = await asyncio.wait_for(call, LONG_WAIT / 2)
            assert [e.event_key for e in answer.events] == ["after-the-claim"]
    finally:
        other.kill()


async def test_an_event_accepted_here_while_nobody_waits_is_claimed_by_the_next_waiting_claim(
    quiet: InboxServiceStub, quiet_server: RunningServer, ns: str
) -> None:
    await _poll_with_nobody_left_waiting(quiet_server.inbox, ns)
    await quiet.Accept(accept_request(ns, "nobody-heard"))
    answer = await asyncio.wait_for(waiting_claim(quiet, ns), LONG_WAIT / 2)
    assert [e.event_key for e in answer.events] == ["nobody-heard"]


async def test_a_waiting_claim_looks_again_once_the_clock_has_moved_past_a_delay(
    db: Database, settings: Settings, ns: str
) -> None:
    now = [datetime(2031, 1, 1, tzinfo=UTC)]
    inbox = Inbox(db, settings, clock=lambda: now[0], fallback_poll_seconds=NO_FALLBACK)
    delayed = _event(ns, "later")
    await inbox.accept([replace(delayed, available_at=now[0] + timedelta(minutes=1))])
    await _poll_with_nobody_left_waiting(inbox, ns)
    now[0] += timedelta(minutes=2)
    batch = await inbox.claim(replace(_waiting(ns, ()), wait=timedelta(seconds=3)))
    assert [e.event_key for e in batch.events] == ["later"]
