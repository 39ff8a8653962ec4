"""AcceptStream on a real server and PostgreSQL: answers after commit by sequence, refusals alone, the window."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from inboxd.config.settings import Settings
from inboxd.config.tokens import TokenRegistry
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import NO_RESCUER
from tests.harness import eventually
from tests.integration.helpers import TableLocked, accept_request, stream_items_held
from tests.integration.test_auth import A, B, Tokens, bearer, write_tokens

ACCEPTED = inbox_pb2.ACCEPT_OUTCOME_ACCEPTED
DUPLICATE = inbox_pb2.ACCEPT_OUTCOME_DUPLICATE
INVALID = grpc.StatusCode.INVALID_ARGUMENT.value[0]
DENIED = grpc.StatusCode.PERMISSION_DENIED.value[0]
WINDOW = 4
# The end of a stream as read() returns it (grpc.aio.EOF, missing from the stubs).
EOF: Any = getattr(grpc.aio, "EOF")  # noqa: B009


def item(sequence: int, ns: str, key: str, payload: Any = None) -> inbox_pb2.AcceptStreamRequest:
    return inbox_pb2.AcceptStreamRequest(sequence=sequence, accept=accept_request(ns, key, payload))


async def stored(db: Database, ns: str) -> set[str]:
    async def work(conn: Any) -> set[str]:
        cur = await conn.execute("SELECT event_key FROM inbox_events WHERE namespace = %s", (ns,))
        return {row[0] for row in await cur.fetchall()}

    return await db.run(work)


async def answers_of(call: Any, count: int) -> dict[int, inbox_pb2.AcceptStreamResponse]:
    """Reads `count` answers, by sequence, failing on a sequence answered twice."""
    got: dict[int, inbox_pb2.AcceptStreamResponse] = {}
    for _ in range(count):
        answer = await call.read()
        assert answer is not EOF, f"the stream ended after {len(got)} of {count} answers"
        assert answer.sequence not in got, f"sequence {answer.sequence} answered twice"
        got[answer.sequence] = answer
    return got


async def test_each_item_is_answered_after_its_commit_by_its_sequence(
    inbox: InboxServiceStub, db: Database, ns: str
) -> None:
    call = inbox.AcceptStream()
    sequences = {1000 + i * 7: f"k{i}" for i in range(40)}
    for sequence, key in sequences.items():
        await call.write(item(sequence, ns, key))
    seen: set[int] = set()
    order: list[int] = []
    for _ in sequences:
        answer = await call.read()
        assert answer.WhichOneof("result") == "accepted", answer
        assert answer.accepted.outcome == ACCEPTED
        # Committed before answered: another connection already sees the row.
        assert sequences[answer.sequence] in await stored(db, ns)
        seen.add(answer.sequence)
        order.append(answer.sequence)
    assert seen == set(sequences)
    # The same stream goes on: a repeat answers DUPLICATE.
    await call.write(item(1, ns, "k0"))
    [again] = (await answers_of(call, 1)).values()
    assert again.sequence == 1 and again.accepted.outcome == DUPLICATE
    await call.done_writing()
    assert await call.read() is EOF
    assert await call.code() == grpc.StatusCode.OK


async def test_a_half_closed_stream_answers_everything_outstanding_then_ends_ok(
    inbox: InboxServiceStub, db: Database, ns: str
) -> None:
    call = inbox.AcceptStream()
    for sequence in range(30):
        await call.write(item(sequence, ns, f"k{sequence}"))
    await call.done_writing()
    got = [answer async for answer in call]
    assert sorted(a.sequence for a in got) == list(range(30))
    assert all(a.accepted.outcome == ACCEPTED for a in got)
    assert await call.code() == grpc.StatusCode.OK
    assert await stored(db, ns) == {f"k{i}" for i in range(30)}


async def test_a_bad_item_is_refused_alone_and_the_stream_goes_on(
    inbox: InboxServiceStub, db: Database, ns: str
) -> None:
    call = inbox.AcceptStream()
    await call.write(item(1, ns, "good-1"))
    await call.write(item(2, ns, "bad", b"{not json"))
    await call.write(inbox_pb2.AcceptStreamRequest(sequence=3))  # no AcceptRequest at all
    await call.write(item(4, "", "no-namespace"))
    await call.write(item(5, ns, "good-5"))
    got = await answers_of(call, 5)
    assert got[1].accepted.outcome == ACCEPTED and got[5].accepted.outcome == ACCEPTED
    for sequence, field in ((2, "accept.payload"), (3, "accept"), (4, "accept.namespace")):
        assert got[sequence].error.code == INVALID, got[sequence]
        assert got[sequence].error.message.startswith(f"{field}: "), got[sequence].error.message
    # After the refusals, the stream still takes items.
    await call.write(item(6, ns, "good-6"))
    assert (await answers_of(call, 1))[6].accepted.outcome == ACCEPTED
    await call.done_writing()
    assert await call.code() == grpc.StatusCode.OK
    assert await stored(db, ns) == {"good-1", "good-5", "good-6"}


async def test_a_sequence_reused_while_unanswered_refuses_the_reuse_only(
    window_server: RunningServer, db: Database, ns: str
) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{window_server.port}") as channel:
        call = InboxServiceStub(channel).AcceptStream()
        async with TableLocked(db):
            await call.write(item(7, ns, "first"))
            await call.write(item(7, ns, "second"))
            [reused] = (await answers_of(call, 1)).values()
            assert reused.sequence == 7 and reused.error.code == INVALID
            assert reused.error.message.startswith("sequence: "), reused.error.message
        [first] = (await answers_of(call, 1)).values()
        assert first.sequence == 7 and first.accepted.outcome == ACCEPTED
        await call.done_writing()
        assert await call.code() == grpc.StatusCode.OK
    assert await stored(db, ns) == {"first"}


@pytest.fixture(scope="module")
async def window_server(db: Database) -> AsyncIterator[RunningServer]:
    settings = Settings(listen="127.0.0.1:0", rescue_interval=NO_RESCUER, accept_stream_window=WINDOW)
    running = await start_server(settings, db)
    yield running
    await running.stop(1.0)


async def test_the_server_reads_at_most_a_window_of_unanswered_items_then_resumes(
    window_server: RunningServer, db: Database, ns: str
) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{window_server.port}") as channel:
        call = InboxServiceStub(channel).AcceptStream()
        count = WINDOW + 6
        async with TableLocked(db):
            for sequence in range(count):
                await call.write(item(sequence, ns, f"k{sequence}"))
            await eventually(lambda: stream_items_held(window_server) >= WINDOW, "the stream to fill its window")
            # Every item is small and already sent: only the window keeps the rest unread.
            # A moment for the reader to overrun it, if it would (nothing signals a read not made).
            await asyncio.sleep(0.3)
            assert stream_items_held(window_server) == WINDOW
            assert await stored(db, ns) == set()
        # Released: the commits free room, the server reads on, every item is answered.
        got = await answers_of(call, count)
        assert all(a.accepted.outcome == ACCEPTED for a in got.values())
        await call.done_writing()
        assert await call.code() == grpc.StatusCode.OK
    assert stream_items_held(window_server) == 0
    assert await stored(db, ns) == {f"k{i}" for i in range(count)}


@pytest.fixture(scope="module")
def tokens(tmp_path_factory: pytest.TempPathFactory) -> Tokens:
    return write_tokens(tmp_path_factory.mktemp("tokens") / "tokens.toml")


@pytest.fixture(scope="module")
async def guarded(db: Database, tokens: Tokens) -> AsyncIterator[grpc.aio.Channel]:
    settings = Settings(listen="127.0.0.1:0", tokens_file=tokens.file, rescue_interval=NO_RESCUER)
    running = await start_server(settings, db, registry=TokenRegistry(tokens.file))
    async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        yield channel
    await running.stop(1.0)


async def test_a_namespace_not_granted_refuses_that_item_alone(
    guarded: grpc.aio.Channel, tokens: Tokens, db: Database, ns: str
) -> None:
    mine, theirs = f"{A}/{ns}", f"{B}/{ns}"
    call = InboxServiceStub(guarded).AcceptStream(metadata=bearer(tokens.edge_a))
    await call.write(item(1, mine, "k"))
    await call.write(item(2, theirs, "k"))
    await call.write(item(3, mine, "k2"))
    got = await answers_of(call, 3)
    assert got[1].accepted.outcome == ACCEPTED and got[3].accepted.outcome == ACCEPTED
    assert got[2].error.code == DENIED, got[2]
    assert "accept.namespace" in got[2].error.message
    await call.done_writing()
    assert await call.code() == grpc.StatusCode.OK
    assert await stored(db, theirs) == set()


@pytest.mark.parametrize("who", ["no token", "unknown token", "worker token"])
async def test_a_stream_without_the_accept_scope_is_refused_before_any_message(
    guarded: grpc.aio.Channel, tokens: Tokens, who: str
) -> None:
    token = {"no token": None, "unknown token": "nope", "worker token": tokens.worker_a}[who]
    expected = grpc.StatusCode.PERMISSION_DENIED if who == "worker token" else grpc.StatusCode.UNAUTHENTICATED
    call = InboxServiceStub(guarded).AcceptStream(metadata=bearer(token))
    # Nothing written: the refusal comes on the metadata alone.
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call.read()
    assert caught.value.code() == expected, caught.value


async def test_a_payload_over_the_limit_is_that_items_refusal_and_a_message_over_it_ends_the_stream(
    inbox: InboxServiceStub, settings: Settings, db: Database, ns: str
) -> None:
    limit = settings.max_payload_bytes
    call = inbox.AcceptStream()
    await call.write(item(1, ns, "fits"))
    # Over the payload limit, within the message limit: judged as a unary Accept judges it.
    await call.write(item(2, ns, "big", b'"' + b"x" * limit + b'"'))
    got = await answers_of(call, 2)
    assert got[1].accepted.outcome == ACCEPTED
    assert got[2].error.code == INVALID and got[2].error.message.startswith("accept.payload: "), got[2]
    # Over the message limit: never parsed, so its sequence is unknown, and the stream ends.
    await call.write(item(3, ns, "huge", b'"' + b"x" * (3 * limit) + b'"'))
    assert await call.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "AcceptStream takes at most" in (await call.details() or "")
    assert await stored(db, ns) == {"fits"}


async def test_a_cancelled_stream_leaves_what_it_submitted_to_group_commit(
    server: RunningServer, inbox: InboxServiceStub, db: Database, ns: str
) -> None:
    call = inbox.AcceptStream()
    async with TableLocked(db):
        for sequence in range(5):
            await call.write(item(sequence, ns, f"k{sequence}"))
        await eventually(lambda: stream_items_held(server) == 5, "the server to hold the five items")
        call.cancel()
        await eventually(lambda: stream_items_held(server) == 0, "the server to let the cancelled stream go")
    # Never acknowledged, and committed all the same: their group was not the stream's to cancel.
    await eventually(lambda: _stored_all(db, ns, 5), "the submitted items to commit")


async def _stored_all(db: Database, ns: str, count: int) -> bool:
    return await stored(db, ns) == {f"k{i}" for i in range(count)}
