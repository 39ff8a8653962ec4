"""A reload of the tokens file (SIGHUP) ends the open streams of the tokens it takes away, and no others.

Against a real `inboxd serve` process: the streams are admitted once, on
their metadata, so without a judgement on reload a revoked token's open
AcceptStream kept accepting and its Work stream kept being pushed events.
"""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from inboxd.config.tokens import Scope, entry_toml, new_token
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.harness import ServerProcess
from tests.integration.helpers import accept_request
from tests.integration.work_streams import EOF, Worker

Grants = dict[str, tuple[list[Scope], list[str]]]


def _write(path: Path, tokens: dict[str, str], grants: Grants) -> None:
    path.write_text("\n".join(entry_toml(name, tokens[name], *grants[name]) for name in grants))


def _bearer(token: str) -> dict[str, Any]:
    return {"metadata": [("authorization", f"Bearer {token}")]}


async def _ended(call: Any, within: float) -> tuple[grpc.StatusCode, str]:
    """Reads `call` until it ends (within `within` seconds); its status code and details."""

    async def drain() -> None:
        while await call.read() is not EOF:
            pass

    try:
        await asyncio.wait_for(drain(), within)
    except grpc.aio.AioRpcError:
        pass
    return await call.code(), await call.details()


class _Rig:
    def __init__(self, path: Path, server: ServerProcess, stub: InboxServiceStub, tokens: dict[str, str]) -> None:
        self.path, self.server, self.stub, self.tokens = path, server, stub, tokens

    async def reload(self, grants: Grants) -> None:
        """Writes `grants` (and a new probe token), sends SIGHUP, and returns once the probe token is taken."""
        self.tokens["probe"] = new_token()
        _write(self.path, self.tokens, {**grants, "probe": ([Scope.ACCEPT], ["probe/*"])})
        assert self.server.proc is not None
        self.server.proc.send_signal(signal.SIGHUP)
        for _ in range(200):  # bounded: the reload is asynchronous to us
            try:
                await self.stub.Accept(accept_request("probe/ns", "k"), timeout=5, **_bearer(self.tokens["probe"]))
            except grpc.aio.AioRpcError as exc:
                assert exc.code() == grpc.StatusCode.UNAUTHENTICATED, exc
                await asyncio.sleep(0.05)
            else:
                return
        raise AssertionError("the tokens file was not reloaded after SIGHUP")


@pytest.fixture(scope="module")
async def rig(migrated_url: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[_Rig]:
    path = tmp_path_factory.mktemp("revocation") / "tokens.toml"
    names = ("edge", "worker", "steady-edge", "steady-worker", "narrowed", "unscoped", "widened", "probe")
    tokens = {name: new_token() for name in names}
    _write(path, tokens, {"probe": ([Scope.ACCEPT], ["probe/*"])})
    server = await asyncio.to_thread(
        ServerProcess(database_url=migrated_url, env={"INBOXD_TOKENS_FILE": str(path)}).start
    )
    try:
        async with grpc.aio.insecure_channel(server.target) as channel:
            yield _Rig(path, server, InboxServiceStub(channel), tokens)
    finally:
        server.kill()


async def test_a_revoked_tokens_streams_end_and_its_held_events_go_to_another_worker(rig: _Rig) -> None:
    ns = f"tenant-a/{uuid.uuid4().hex[:8]}"
    grants: Grants = {
        name: ([scope], ["tenant-a/*"])
        for name, scope in (
            ("edge", Scope.ACCEPT),
            ("worker", Scope.WORK),
            ("steady-edge", Scope.ACCEPT),
            ("steady-worker", Scope.WORK),
        )
    }
    await rig.reload(grants)
    stub, tokens = rig.stub, rig.tokens
    # A Work stream that has not subscribed yet: its handler waits for the subscription.
    unsubscribed = stub.Work(**_bearer(tokens["worker"]))
    edge = stub.AcceptStream(**_bearer(tokens["edge"]))
    steady_edge = stub.AcceptStream(**_bearer(tokens["steady-edge"]))
    for sequence, stream in enumerate((edge, steady_edge), start=1):
        await stream.write(inbox_pb2.AcceptStreamRequest(sequence=sequence, accept=accept_request(ns, f"k{sequence}")))
        answer = await asyncio.wait_for(stream.read(), 10)
        assert answer.HasField("accepted"), answer
    # The worker to be revoked holds one event; the steady one waits with credit.
    worker = Worker(stub, **_bearer(tokens["worker"]))
    await worker.subscribe([ns], credit=1)
    [held] = await worker.pushed(1)
    steady = Worker(stub, **_bearer(tokens["steady-worker"]))
    await steady.subscribe([ns], credit=10)
    [other] = await steady.pushed(1)
    assert other.event_key != held.event_key

    revoked = {name: grants[name] for name in ("steady-edge", "steady-worker")}
    await rig.reload(revoked)
    # The probe's Accept above came after the reload had judged every stream: each ends at once.
    for stream in (edge, worker.call, unsubscribed):
        code, details = await _ended(stream, within=1.0)
        assert code == grpc.StatusCode.UNAUTHENTICATED, details
        assert "revoked" in details
    # The event the revoked worker held is handed on at once, not a lease later (attempt counted: it ended).
    [handed_on] = await steady.pushed(1)
    assert (handed_on.event_key, handed_on.attempt) == (held.event_key, 2)
    assert (await steady.complete(handed_on)).WhichOneof("result") == "complete"
    # The unchanged token's AcceptStream goes on.
    await steady_edge.write(inbox_pb2.AcceptStreamRequest(sequence=9, accept=accept_request(ns, "after")))
    answer = await asyncio.wait_for(steady_edge.read(), 10)
    assert answer.HasField("accepted"), answer
    await steady_edge.done_writing()
    assert (await _ended(steady_edge, within=10))[0] == grpc.StatusCode.OK
    assert await steady.close() == grpc.StatusCode.OK


async def test_a_stream_ends_when_its_token_loses_the_scope_or_a_grant_and_goes_on_when_grants_widen(
    rig: _Rig,
) -> None:
    ns = f"tenant-a/{uuid.uuid4().hex[:8]}"
    before: Grants = {
        "unscoped": ([Scope.WORK], ["tenant-a/*"]),
        "narrowed": ([Scope.WORK], ["tenant-a/*", "tenant-b/*"]),
        "widened": ([Scope.WORK], ["tenant-a/*"]),
    }
    await rig.reload(before)
    workers = {name: Worker(rig.stub, **_bearer(rig.tokens[name])) for name in ("unscoped", "narrowed", "widened")}
    for worker in workers.values():
        await worker.subscribe([ns], credit=1)
    after: Grants = {
        "unscoped": ([Scope.ACCEPT], ["tenant-a/*"]),
        "narrowed": ([Scope.WORK], ["tenant-a/*"]),
        "widened": ([Scope.WORK, Scope.ACCEPT], ["tenant-a/*", "tenant-c/*"]),
    }
    await rig.reload(after)
    code, details = await _ended(workers["unscoped"].call, within=1.0)
    assert code == grpc.StatusCode.PERMISSION_DENIED and "no longer holds the 'work' scope" in details, details
    # Opened again, it is judged by the grants in force (and its subscription still granted: it works).
    code, details = await _ended(workers["narrowed"].call, within=1.0)
    assert code == grpc.StatusCode.UNAVAILABLE and "no longer granted 'tenant-b/*'" in details, details
    # A token that only gained goes on: it is pushed what arrives.
    await rig.stub.Accept(accept_request(ns, "late"), timeout=10, **_bearer(rig.tokens["widened"]))
    [late] = await workers["widened"].pushed(1)
    assert late.event_key == "late"
    assert await workers["widened"].close() == grpc.StatusCode.OK
