"""The Worker on the Work stream: credit for its free slots only, and a stream cut by the network.

The cut is real: the worker talks to the server through a TCP proxy that
resets every connection on demand (`TcpProxy.cut`), as a dropped network does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest

from inboxd.config.settings import Settings
from inboxd.config.tokens import TokenRegistry
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd_client import (
    ActionState,
    AsyncInboxClient,
    EventContext,
    InboxError,
    PermissionDenied,
    Reconciled,
    Unauthenticated,
    Worker,
)
from tests.client.conftest import FAST_RETRY
from tests.client.helpers import accept, eventually, read_event, running, state_of
from tests.client.tcp_proxy import TcpProxy
from tests.conftest import NO_RESCUER
from tests.integration.test_auth import B, Tokens, write_tokens

RECONNECT_FAST = [("grpc.initial_reconnect_backoff_ms", 50), ("grpc.max_reconnect_backoff_ms", 200)]


@pytest.fixture
async def proxy(server: RunningServer) -> AsyncIterator[TcpProxy]:
    running_proxy = await TcpProxy(server.port).start()
    yield running_proxy
    await running_proxy.stop()


async def processing(db: Database, ns: str) -> int:
    async def count(conn: object) -> int:
        cur = await conn.execute(  # type: ignore[attr-defined]
            "SELECT count(*) FROM inbox_events WHERE namespace = %s AND state = 'processing'", (ns,)
        )
        row = await cur.fetchone()
        return int(row[0])

    result: int = await db.run(count)
    return result


async def test_a_stream_worker_holds_no_more_events_than_its_free_slots(
    client: AsyncInboxClient, db: Database, ns: str
) -> None:
    keys = [f"k{i}" for i in range(6)]
    started: list[str] = []
    go = asyncio.Event()

    async def handle(ctx: EventContext) -> None:
        started.append(ctx.event_key)
        await go.wait()

    await accept(client, ns, *keys)
    worker = Worker(client, handle, namespaces=[ns], concurrency=2, use_streams=True)
    async with running(worker):
        await eventually(lambda: len(started) == 2, "two handlers started")
        # Pushes come the moment credit allows: had it given more, more would be claimed by now.
        await asyncio.sleep(0.3)
        assert (len(started), await processing(db, ns)) == (2, 2)
        go.set()
        await eventually(lambda: worker.stats.completed == len(keys), "every event completed, two at a time")
    assert worker.stats.renewals == 0  # short handlers: the stream kept their leases
    assert [await state_of(db, ns, k) for k in keys] == ["completed"] * len(keys)


async def test_a_stopping_stream_worker_takes_back_the_credit_it_gave(
    client: AsyncInboxClient, server: RunningServer, ns: str
) -> None:
    started = asyncio.Event()
    go = asyncio.Event()

    async def handle(ctx: EventContext) -> None:
        started.set()
        await go.wait()

    await accept(client, ns, "held")
    worker_id = f"stopping-{ns}"
    worker = Worker(client, handle, namespaces=[ns], concurrency=3, grace=30, use_streams=True, worker_id=worker_id)

    def credit() -> int:
        [mine] = [s for s in server.inbox.streams.live() if s.worker_id == worker_id]
        return mine.credit

    task = asyncio.create_task(worker.run(handle_signals=False))
    await asyncio.wait_for(started.wait(), 10)
    assert credit() == 2  # two free slots
    worker.stop()
    # While its handler finishes, the server holds no credit of it: an event it
    # gives back now is not pushed to it again.
    await eventually(lambda: credit() == 0, "the stream's credit dropped")
    go.set()
    await asyncio.wait_for(task, 30)
    assert worker.stats.completed == 1


async def test_a_cut_stream_is_opened_again_and_the_events_whose_claims_it_ended_run_again(
    proxy: TcpProxy, db: Database, ns: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="inboxd_client.worker")
    runs: list[int] = []
    first_cancelled = asyncio.Event()

    async def handle(ctx: EventContext) -> None:
        runs.append(ctx.attempt)
        if ctx.attempt == 1:
            try:
                await asyncio.Event().wait()  # works until its claim is gone
            except asyncio.CancelledError:
                first_cancelled.set()
                raise

    async with AsyncInboxClient(
        f"127.0.0.1:{proxy.port}", retry=FAST_RETRY, timeout=10.0, options=RECONNECT_FAST
    ) as client:
        await accept(client, ns, "k")
        worker = Worker(client, handle, namespaces=[ns], concurrency=1, use_streams=True)
        async with running(worker):
            await eventually(lambda: runs == [1], "the first attempt started")
            proxy.cut()
            # The stream's end ended the claim: the handler is told, as for a lost lease.
            await asyncio.wait_for(first_cancelled.wait(), 10)
            proxy.mend()
            # Subscribed again through the proxy; the server had the event back at once, attempt counted.
            await eventually(lambda: worker.stats.completed == 1, "the event completed on the new stream")
    assert runs == [1, 2]
    assert (worker.stats.superseded, worker.stats.claimed) == (1, 2)
    assert "the Work stream broke" in caplog.text
    row = await read_event(db, ns, "k")
    assert (row["state"], row["attempt"]) == ("completed", 2)


async def test_an_outcome_recorded_while_the_stream_is_down_reaches_the_ledger_on_the_next_stream(
    proxy: TcpProxy, db: Database, ns: str
) -> None:
    in_action = asyncio.Event()
    seen_on_retry: list[tuple[int, str]] = []

    async def handle(ctx: EventContext) -> None:
        if ctx.attempt == 1:
            async with ctx.action("send:v1") as act:
                assert not act.done
                in_action.set()
                await asyncio.Event().wait()  # cut off mid-call: recorded UNKNOWN, over whatever stream there is
        record = ctx.actions["send:v1"]
        seen_on_retry.append((record.state, record.detail))
        await ctx.run_action("send:v1", _never, reconcile=_it_happened)

    async with AsyncInboxClient(
        f"127.0.0.1:{proxy.port}", retry=FAST_RETRY, timeout=10.0, options=RECONNECT_FAST
    ) as client:
        await accept(client, ns, "k")
        worker = Worker(client, handle, namespaces=[ns], concurrency=1, use_streams=True)
        async with running(worker):
            await asyncio.wait_for(in_action.wait(), 10)
            proxy.cut()  # the handler is cancelled while no stream is open: its UNKNOWN waits for the next
            await asyncio.sleep(0.2)  # a while with no connection at all; nothing signals "still down"
            proxy.mend()
            await eventually(lambda: worker.stats.completed == 1, "the event completed on the new stream")
    assert len(seen_on_retry) == 1
    state, detail = seen_on_retry[0]
    assert state == ActionState.ACTION_STATE_UNKNOWN and "CancelledError" in detail
    assert (await read_event(db, ns, "k"))["state"] == "completed"


async def _never(key: str) -> str:
    raise AssertionError("reconciliation found the effect: the action must not run again")


async def _it_happened(key: str) -> Reconciled:
    return Reconciled(succeeded=True, external_ref="found")


@pytest.fixture(scope="module")
def tokens(tmp_path_factory: pytest.TempPathFactory) -> Tokens:
    return write_tokens(tmp_path_factory.mktemp("tokens") / "tokens.toml")


@pytest.fixture(scope="module")
async def guarded_port(db: Database, tokens: Tokens) -> AsyncIterator[int]:
    settings = Settings(listen="127.0.0.1:0", tokens_file=tokens.file, rescue_interval=NO_RESCUER)
    running_server = await start_server(settings, db, registry=TokenRegistry(tokens.file))
    yield running_server.port
    await running_server.stop(1.0)


@pytest.mark.parametrize(
    ("who", "refused"),
    [("unknown token", Unauthenticated), ("a namespace not granted", PermissionDenied)],
)
async def test_a_stream_refused_for_its_credentials_stops_the_worker_with_the_error(
    guarded_port: int, tokens: Tokens, who: str, refused: type[InboxError]
) -> None:
    token = "not-a-token" if who == "unknown token" else tokens.worker_a
    async with AsyncInboxClient(f"127.0.0.1:{guarded_port}", token=token, retry=FAST_RETRY, timeout=10.0) as client:
        # worker-a may work tenant-a/* only.
        worker = Worker(client, _never_handled, namespaces=[f"{B}/x"], use_streams=True)
        with pytest.raises(refused):
            await asyncio.wait_for(worker.run(handle_signals=False), 10)


async def _never_handled(ctx: EventContext) -> None:
    raise AssertionError("a refused stream pushes nothing")
