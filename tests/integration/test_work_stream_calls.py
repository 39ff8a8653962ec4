"""The Work stream's fenced calls answer with the unary calls' codes; its pushes keep the Claim's rules.

Ordering keys, stale revisions and dead letters hold on the stream as on a
unary Claim, and a subscription to several namespaces is pushed from each in turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from inboxd.api.work_stream import WorkStreaming
from inboxd.config.settings import Settings
from inboxd.config.tokens import Scope, TokenRegistry, entry_toml, new_token
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Connection, Database
from inboxd_client.v1 import inbox_pb2, types_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import CLOCKED_SETTINGS, NO_RESCUER
from tests.harness import eventually
from tests.integration.helpers import TableLocked, accept_request, read_event, seconds
from tests.integration.test_auth import A, B, Tokens, bearer, write_tokens
from tests.integration.work_streams import (
    ABORTED,
    DENIED,
    INVALID,
    NOT_FOUND,
    OK,
    PRECONDITION,
    Worker,
    fence_of,
)


async def test_each_fenced_call_answers_as_its_unary_call_would(work: InboxServiceStub, db: Database, ns: str) -> None:
    for key in ("a", "b", "c"):
        await work.Accept(accept_request(ns, key))
    worker = Worker(work)
    await worker.subscribe([ns], credit=3)
    events = {e.event_key: e for e in await worker.pushed(3)}
    a, b, c = events["a"], events["b"], events["c"]
    renewed = await worker.ask(renew_lease=inbox_pb2.RenewLeaseRequest(**fence_of(a), lease=seconds(60)))
    assert renewed.WhichOneof("result") == "renew_lease" and renewed.renew_lease.lease_expires_at.seconds > 0
    intended = await worker.ask(
        record_action_outcome=inbox_pb2.RecordActionOutcomeRequest(
            **fence_of(a), action="send:v1", state=types_pb2.ACTION_STATE_INTENDED
        )
    )
    assert intended.record_action_outcome.action.idempotency_key, intended
    # Release gives the event back without counting the attempt.
    released = await worker.ask(release=inbox_pb2.ReleaseRequest(**fence_of(b)))
    assert released.WhichOneof("result") == "release"
    row = await read_event(db, ns, "b")
    assert (row["state"], row["attempt"]) == ("pending", 0)
    # The released token is dead: every fenced call with it is ABORTED, and the stream goes on.
    for call in (
        {"complete": inbox_pb2.CompleteRequest(**fence_of(b))},
        {"renew_lease": inbox_pb2.RenewLeaseRequest(**fence_of(b))},
        {"fail": inbox_pb2.FailRequest(**fence_of(b), error="x")},
        {"release": inbox_pb2.ReleaseRequest(**fence_of(b))},
        {
            "record_action_outcome": inbox_pb2.RecordActionOutcomeRequest(
                **fence_of(b), action="send:v1", state=types_pb2.ACTION_STATE_INTENDED
            )
        },
    ):
        refused = await worker.ask(**call)
        assert refused.error.code == ABORTED, (call, refused)
    unknown = {**fence_of(a), "event_key": "nobody"}
    missing = await worker.ask(complete=inbox_pb2.CompleteRequest(**unknown))
    assert missing.error.code == NOT_FOUND, missing
    bad = await worker.ask(complete=inbox_pb2.CompleteRequest(**{**fence_of(a), "namespace": ""}))
    assert bad.error.code == INVALID and bad.error.message.startswith("complete.namespace: "), bad
    ignored = await worker.ask(
        complete=inbox_pb2.CompleteRequest(**fence_of(a), disposition=types_pb2.DISPOSITION_IGNORED)
    )
    assert ignored.error.code == INVALID and ignored.error.message.startswith("complete.reason: "), ignored
    # A permanent failure dead-letters, as a unary Fail's would.
    failed = await worker.ask(fail=inbox_pb2.FailRequest(**fence_of(c), error="broken", permanent=True))
    assert failed.fail.state == types_pb2.EVENT_STATE_DEAD_LETTERED
    batch = await worker.ask(
        complete_batch=inbox_pb2.CompleteBatchRequest(
            completions=[inbox_pb2.CompleteRequest(**fence_of(a)), inbox_pb2.CompleteRequest(**fence_of(c))]
        )
    )
    assert [r.code for r in batch.complete_batch.results] == [OK, ABORTED], batch
    # An outcome after the event completed, from its claim: accepted; SUCCEEDED then FAILED is not.
    done = await worker.ask(
        record_action_outcome=inbox_pb2.RecordActionOutcomeRequest(
            **fence_of(a), action="send:v1", state=types_pb2.ACTION_STATE_SUCCEEDED
        )
    )
    assert done.record_action_outcome.action.state == types_pb2.ACTION_STATE_SUCCEEDED
    after = await worker.ask(
        record_action_outcome=inbox_pb2.RecordActionOutcomeRequest(
            **fence_of(a), action="send:v1", state=types_pb2.ACTION_STATE_FAILED
        )
    )
    assert after.error.code == PRECONDITION, after
    assert (await read_event(db, ns, "a"))["state"] == "completed"
    assert await worker.close() == grpc.StatusCode.OK


async def test_a_failed_event_is_pushed_again_until_its_attempts_are_spent(
    work: InboxServiceStub, db: Database, ns: str
) -> None:
    await work.Accept(accept_request(ns, "k"))
    worker = Worker(work)
    await worker.subscribe([ns], credit=CLOCKED_SETTINGS.max_attempts)
    for attempt in range(1, CLOCKED_SETTINGS.max_attempts + 1):
        [event] = await worker.pushed(1)
        assert event.attempt == attempt
        result = await worker.ask(fail=inbox_pb2.FailRequest(**fence_of(event), error="again", retry_after=seconds(0)))
        assert result.WhichOneof("result") == "fail", result
    assert result.fail.state == types_pb2.EVENT_STATE_DEAD_LETTERED
    row = await read_event(db, ns, "k")
    assert (row["state"], row["attempt"], row["last_error"]) == ("dead_lettered", 3, "again")
    assert await worker.close() == grpc.StatusCode.OK


async def test_a_sequence_reused_while_in_flight_refuses_the_new_call_only(
    work: InboxServiceStub, db: Database, ns: str
) -> None:
    await work.Accept(accept_request(ns, "k"))
    worker = Worker(work)
    await worker.subscribe([ns], credit=1)
    [event] = await worker.pushed(1)
    async with TableLocked(db):
        await worker.send(7, complete=inbox_pb2.CompleteRequest(**fence_of(event)))
        await worker.send(7, release=inbox_pb2.ReleaseRequest(**fence_of(event)))
        reused = await worker.result(7)
        assert reused.error.code == INVALID and reused.error.message.startswith("sequence: "), reused
    first = await worker.result(7)
    assert first.WhichOneof("result") == "complete", first
    assert await worker.close() == grpc.StatusCode.OK


async def test_events_of_one_ordering_key_are_pushed_one_at_a_time_in_revision_order(
    work: InboxServiceStub, ns: str
) -> None:
    for key, revision in (("r2", 2), ("r1", 1), ("r3", 3)):
        await work.Accept(accept_request(ns, key, ordering_key="order-1", revision=revision))
    worker = Worker(work)
    await worker.subscribe([ns], credit=3)
    order = []
    for _ in range(3):
        [event] = await worker.pushed(1)
        # Only the key's next is pushed, whatever the credit: the rest wait for its completion.
        order.append(event.event_key)
        assert (await worker.complete(event)).WhichOneof("result") == "complete"
    assert order == ["r1", "r2", "r3"]
    assert await worker.close() == grpc.StatusCode.OK


async def test_a_stale_revision_is_completed_ignored_and_never_pushed(
    work: InboxServiceStub, db: Database, ns: str
) -> None:
    await work.Accept(accept_request(ns, "v5", ordering_key="o", revision=5))
    worker = Worker(work)
    await worker.subscribe([ns], credit=1)
    [v5] = await worker.pushed(1)
    assert (await worker.complete(v5)).WhichOneof("result") == "complete"
    await work.Accept(accept_request(ns, "v3", ordering_key="o", revision=3))
    await work.Accept(accept_request(ns, "v6", ordering_key="o", revision=6))
    # Credit for both: the server's clock stands still here, so v3 and v6 are
    # due at the same instant and a look for one event may take either.
    await worker.credit(2)
    [v6] = await worker.pushed(1)
    assert v6.event_key == "v6" and v6.applied_revision == 5
    row = await read_event(db, ns, "v3")
    assert (row["state"], row["disposition"]) == ("completed", "ignored")
    assert await worker.close() == grpc.StatusCode.OK


async def test_a_worker_that_stops_pushing_is_never_pushed_what_it_gives_back(
    work: InboxServiceStub, clocked_server: RunningServer, db: Database, ns: str
) -> None:
    for key in ("k1", "k2"):
        await work.Accept(accept_request(ns, key))
    worker = Worker(work)
    await worker.subscribe([ns], credit=3, worker_id=f"stopper-{ns}")
    pushed = await worker.pushed(2)
    # The stop rides on the Release: read first, so the event released is not pushed back on the credit left.
    given_back = await worker.ask(release=inbox_pb2.ReleaseRequest(**fence_of(pushed[0])), stop_pushing=True)
    assert given_back.WhichOneof("result") == "release"
    [mine] = [s for s in clocked_server.inbox.streams.live() if s.worker_id == f"stopper-{ns}"]
    assert (mine.credit, mine.held) == (0, 1)
    # Credit that comes after the stop is no credit either.
    await worker.call.write(inbox_pb2.WorkRequest(credit=5))
    assert (await worker.complete(pushed[1])).WhichOneof("result") == "complete"
    assert await worker.close() == grpc.StatusCode.OK
    await clocked_server.inbox.streams.closed()  # what it held (were k1 pushed again) ends by now
    released = await read_event(db, ns, pushed[0].event_key)
    assert (released["state"], released["attempt"]) == ("pending", 0)
    assert len(worker.events) == 2


async def test_a_backlog_in_one_namespace_delays_anothers_events_by_one_turn_at_most(
    work: InboxServiceStub, ns: str
) -> None:
    busy, quiet = f"{ns}/busy", f"{ns}/quiet"
    await work.AcceptBatch(inbox_pb2.AcceptBatchRequest(events=[accept_request(busy, f"b{i}") for i in range(40)]))
    # Accepted last: oldest due first alone would push it after the whole backlog.
    await work.Accept(accept_request(quiet, "q"))
    worker = Worker(work)
    await worker.subscribe([busy, quiet], credit=5)
    # One turn of the two namespaces within the first credit: the quiet one's event among the five.
    pushed = [e.namespace for e in await worker.pushed(5)]
    assert quiet in pushed, pushed
    worker.call.cancel()


@pytest.fixture(scope="module")
def tokens(tmp_path_factory: pytest.TempPathFactory) -> Tokens:
    return write_tokens(tmp_path_factory.mktemp("tokens") / "tokens.toml")


@pytest.fixture(scope="module")
async def guarded(db: Database, tokens: Tokens) -> AsyncIterator[InboxServiceStub]:
    settings = Settings(listen="127.0.0.1:0", tokens_file=tokens.file, rescue_interval=NO_RESCUER)
    running = await start_server(settings, db, registry=TokenRegistry(tokens.file))
    async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        yield InboxServiceStub(channel)
    await running.stop(1.0)


async def test_a_subscription_to_a_namespace_not_granted_ends_the_stream_permission_denied(
    guarded: InboxServiceStub, tokens: Tokens, ns: str
) -> None:
    worker = Worker(guarded, metadata=bearer(tokens.worker_a))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await worker.subscribe([f"{A}/{ns}", f"{B}/{ns}"])
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "subscribe.namespaces[1]" in (caught.value.details() or "") or B in (caught.value.details() or "")


@pytest.mark.parametrize("who", ["no token", "edge token"])
async def test_a_stream_without_the_work_scope_is_refused_before_any_message_and_one_with_it_is_served(
    guarded: InboxServiceStub, tokens: Tokens, who: str, ns: str
) -> None:
    token = None if who == "no token" else tokens.edge_a
    call = guarded.Work(metadata=bearer(token))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call.read()
    expected = grpc.StatusCode.UNAUTHENTICATED if token is None else grpc.StatusCode.PERMISSION_DENIED
    assert caught.value.code() == expected
    worker = Worker(guarded, metadata=bearer(tokens.worker_a))
    await worker.subscribe([f"{A}/{ns}"])
    assert await worker.close() == grpc.StatusCode.OK


async def test_a_call_on_a_namespace_not_granted_is_refused_alone(
    guarded: InboxServiceStub, tokens: Tokens, ns: str
) -> None:
    mine = f"{A}/{ns}"
    await guarded.Accept(accept_request(mine, "k"), metadata=bearer(tokens.root))
    worker = Worker(guarded, metadata=bearer(tokens.worker_a))
    await worker.subscribe([mine], credit=1)
    [event] = await worker.pushed(1)
    assert event.namespace == mine
    theirs = await worker.ask(complete=inbox_pb2.CompleteRequest(**{**fence_of(event), "namespace": f"{B}/{ns}"}))
    assert theirs.error.code == DENIED, theirs
    assert (await worker.complete(event)).WhichOneof("result") == "complete"
    assert await worker.close() == grpc.StatusCode.OK


async def test_the_inbox_shows_each_live_stream_by_worker_and_namespace(
    work: InboxServiceStub, clocked_server: RunningServer, ns: str
) -> None:
    worker = Worker(work)
    await worker.subscribe([ns, f"{ns}/2"], worker_id="host-1/pid-9")
    live = [s for s in clocked_server.inbox.streams.live() if s.worker_id == "host-1/pid-9"]
    assert [(s.namespaces, s.held) for s in live] == [((ns, f"{ns}/2"), 0)]
    assert "host-1/pid-9" in clocked_server.inbox.streams.workers_by_namespace()[ns]
    assert await worker.close() == grpc.StatusCode.OK
    assert "host-1/pid-9" not in clocked_server.inbox.streams.workers_by_namespace().get(ns, [])


async def _waiting(db: Database, statement: str) -> int:
    async def work(conn: Connection) -> int:
        cur = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE %s AND wait_event_type = 'Lock'",
            (f"-- inboxd: {statement}%",),
        )
        row = await cur.fetchone()
        return int(row[0]) if row else 0

    return int(await db.run(work))


async def test_the_server_reads_at_most_a_window_of_unanswered_calls_then_resumes(
    work: InboxServiceStub, db: Database, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(WorkStreaming, "work_call_window", 2)
    for i in range(4):
        await work.Accept(accept_request(ns, f"k{i}"))
    worker = Worker(work)
    await worker.subscribe([ns], credit=4)
    events = await worker.pushed(4)
    async with TableLocked(db):
        sequences = [await worker.send(release=inbox_pb2.ReleaseRequest(**fence_of(e))) for e in events]
        await eventually(lambda: _at_least(db, 2), "two releases to wait on the table")
        # A moment for the reader to overrun the window, if it would (nothing signals a read not made).
        await asyncio.sleep(0.3)
        assert await _waiting(db, "event_release_many") == 2
    for sequence in sequences:
        assert (await worker.result(sequence)).WhichOneof("result") == "release"
    assert await worker.close() == grpc.StatusCode.OK


async def _at_least(db: Database, count: int) -> bool:
    return await _waiting(db, "event_release_many") >= count


async def test_a_subscription_naming_no_namespace_is_pushed_only_what_its_token_may_see(
    inbox: InboxServiceStub, db: Database, tmp_path: Path, ns: str
) -> None:
    token = new_token()
    tokens_file = tmp_path / "tokens.toml"
    tokens_file.write_text(entry_toml("narrow", token, [Scope.WORK], [f"{ns}/mine/*"]))
    # Another tenant's event, accepted first: the oldest due, and not this token's to see. Accepted on
    # the real clock, as the server below runs: the hand-moved clock may be far ahead, its events not yet due.
    await inbox.Accept(accept_request(f"{ns}/theirs", "t"))
    await inbox.Accept(accept_request(f"{ns}/mine/a", "m"))
    settings = Settings(listen="127.0.0.1:0", tokens_file=tokens_file, rescue_interval=NO_RESCUER)
    running = await start_server(settings, db, registry=TokenRegistry(tokens_file))
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            worker = Worker(InboxServiceStub(channel), metadata=bearer(token))
            await worker.subscribe([], credit=5)
            [event] = await worker.pushed(1)
            assert event.namespace == f"{ns}/mine/a"
            assert await worker.close() == grpc.StatusCode.OK
    finally:
        await running.stop(1.0)
    assert (await read_event(db, f"{ns}/theirs", "t"))["state"] == "pending"
