"""Health stays open to probes and reflection to token holders, yet strangers hold neither memory nor connections.

The attacks run against `inboxd serve` in a process of its own, whose resident
set is read from /proc; the 31 MiB messages are pushed by a client that speaks
HTTP/2 itself (`h2_strangers`), so the test holds none of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from inboxd.api.open_services import CHECK, HEALTH_MESSAGE_BYTES, REFLECT, WATCH
from inboxd.config.settings import Settings
from inboxd.config.tokens import Scope, TokenRegistry, entry_toml, new_token
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import NO_RESCUER
from tests.harness import REPO, ServerProcess
from tests.integration.h2_strangers import flood
from tests.integration.helpers import accept_request, expect_status
from tests.integration.test_admission import resident_bytes

MiB = 1024 * 1024
STRANGERS = 128
STRANGER_BYTES = 31 * MiB
# The bound: 128 such calls grow the server by less than this.
MOST_GROWTH_BYTES = 100 * 1000 * 1000
RESOURCE_EXHAUSTED = str(grpc.StatusCode.RESOURCE_EXHAUSTED.value[0])
UNAUTHENTICATED = str(grpc.StatusCode.UNAUTHENTICATED.value[0])
CAP = 10


def _tokens(folder: Path) -> tuple[Path, str]:
    tokens, edge = folder / "tokens.toml", new_token()
    tokens.write_text(entry_toml("edge", edge, [Scope.ACCEPT], ["*"]))
    return tokens, edge


async def test_128_strangers_sending_31_mib_to_health_and_reflection_grow_the_server_by_under_100_mb(
    migrated_url: str, tmp_path: Path
) -> None:
    tokens, _ = _tokens(tmp_path)
    server = await asyncio.to_thread(
        ServerProcess(database_url=migrated_url, env={"INBOXD_TOKENS_FILE": str(tokens)}).start
    )
    assert server.proc is not None
    try:
        before = resident_bytes(server.proc.pid)
        codes: dict[str, set[str]] = {}
        started = time.perf_counter()
        for path in (CHECK, WATCH, REFLECT):
            found = await asyncio.to_thread(flood, server.port, path, calls=STRANGERS, message_bytes=STRANGER_BYTES)
            codes[path] = set(found)
        took = time.perf_counter() - started
        grown = resident_bytes(server.proc.pid) - before
        # Health is still open to a probe without a token, after all that.
        async with grpc.aio.insecure_channel(server.target) as channel:
            answer = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
    finally:
        server.kill()
    print(  # the real numbers, for the record (pytest -s)
        f"\nRSS grew {grown / 1e6:.1f} MB under 3 x {STRANGERS} x 31 MiB strangers (Check, Watch, reflection), "
        f"answered in {took:.1f} s: {codes}"
    )
    assert answer.status == health_pb2.HealthCheckResponse.SERVING
    assert codes == {CHECK: {RESOURCE_EXHAUSTED}, WATCH: {RESOURCE_EXHAUSTED}, REFLECT: {UNAUTHENTICATED}}
    assert grown < MOST_GROWTH_BYTES, f"the server grew by {grown / 1e6:.0f} MB"


def _capped(migrated_url: str, tokens: Path) -> ServerProcess:
    env = {
        "INBOXD_TOKENS_FILE": str(tokens),
        "INBOXD_MAX_CONNECTIONS": str(CAP),
        "INBOXD_UNAUTHENTICATED_CONNECTION_AGE": "2s",
    }
    return ServerProcess(database_url=migrated_url, env=env)


# A connection of its own for each channel.
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]


async def _legitimate_accept(target: str, edge: str) -> tuple[inbox_pb2.AcceptResponse, float]:
    started = time.perf_counter()
    async with grpc.aio.insecure_channel(target, options=OWN_CONNECTION) as channel:
        answer = await InboxServiceStub(channel).Accept(
            accept_request("strangers/ns", new_token()),
            metadata=[("authorization", f"Bearer {edge}")],
            timeout=30,
            wait_for_ready=True,
        )
    return answer, time.perf_counter() - started


async def test_a_legitimate_accept_is_answered_while_strangers_hold_every_connection_with_health_watches(
    migrated_url: str, tmp_path: Path
) -> None:
    tokens, edge = _tokens(tmp_path)
    server = await asyncio.to_thread(_capped(migrated_url, tokens).start)
    strangers = [grpc.aio.insecure_channel(server.target, options=OWN_CONNECTION) for _ in range(CAP)]
    try:
        watches = [health_pb2_grpc.HealthStub(c).Watch(health_pb2.HealthCheckRequest()) for c in strangers]
        for watch in watches:  # each connection holds a slot: its Watch has answered
            first = await asyncio.wait_for(watch.read(), 10)
            assert first.status == health_pb2.HealthCheckResponse.SERVING
        answer, waited = await _legitimate_accept(server.target, edge)
        ended = [await asyncio.wait_for(watch.code(), 10) for watch in watches]
    finally:
        for channel in strangers:
            await channel.close(None)
        server.kill()
    print(f"\nthe Accept was answered {waited:.1f} s after {CAP} Watch streams held the cap of {CAP}")
    assert answer.outcome == inbox_pb2.ACCEPT_OUTCOME_ACCEPTED
    assert set(ended) == {grpc.StatusCode.UNAVAILABLE}


async def test_a_legitimate_accept_is_answered_while_strangers_hold_every_connection_with_reflection_streams(
    migrated_url: str, tmp_path: Path
) -> None:
    tokens, edge = _tokens(tmp_path)
    server = await asyncio.to_thread(_capped(migrated_url, tokens).start)
    strangers = [grpc.aio.insecure_channel(server.target, options=OWN_CONNECTION) for _ in range(CAP)]
    try:
        # Open and silent: a reflection stream that asks nothing is a call in flight all the same.
        streams = [reflection_pb2_grpc.ServerReflectionStub(c).ServerReflectionInfo() for c in strangers]
        for stream in streams:
            with contextlib.suppress(grpc.aio.AioRpcError):  # refused at once is fine: its connection stays
                await asyncio.wait_for(stream.wait_for_connection(), 10)
        answer, waited = await _legitimate_accept(server.target, edge)
        ended = [await asyncio.wait_for(stream.code(), 10) for stream in streams]
    finally:
        for channel in strangers:
            await channel.close(None)
        server.kill()
    print(f"\nthe Accept was answered {waited:.1f} s after {CAP} reflection streams held the cap of {CAP}")
    assert answer.outcome == inbox_pb2.ACCEPT_OUTCOME_ACCEPTED
    assert grpc.StatusCode.OK not in ended


@pytest.fixture(scope="module")
async def guarded(db: Database, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[RunningServer, str]]:
    tokens, edge = _tokens(tmp_path_factory.mktemp("open"))
    settings = replace(Settings(listen="127.0.0.1:0", tokens_file=tokens), rescue_interval=NO_RESCUER)
    running = await start_server(settings, db, registry=TokenRegistry(tokens))
    yield running, edge
    await running.stop(1.0)


async def _reflect(channel: grpc.aio.Channel, metadata: list[tuple[str, str]]) -> set[str]:
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    answers = [answer async for answer in stub.ServerReflectionInfo(iter([request]), metadata=metadata)]
    return {service.name for answer in answers for service in answer.list_services_response.service}


async def test_reflection_takes_any_valid_token_and_refuses_a_stranger(guarded: tuple[RunningServer, str]) -> None:
    running, edge = guarded
    async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        assert "inboxd.v1.InboxService" in await _reflect(channel, [("authorization", f"Bearer {edge}")])
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await _reflect(channel, [])
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "reflection takes a token" in (refused.value.details() or "")


async def test_a_probe_without_a_token_is_answered_serving(guarded: tuple[RunningServer, str]) -> None:
    running, _ = guarded
    async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        assert (await stub.Check(health_pb2.HealthCheckRequest())).status == health_pb2.HealthCheckResponse.SERVING
        watch = stub.Watch(health_pb2.HealthCheckRequest(service="inboxd.v1.InboxService"))
        assert (await watch.read()).status == health_pb2.HealthCheckResponse.SERVING
        watch.cancel()


async def test_a_health_check_over_its_size_limit_is_refused_naming_it(guarded: tuple[RunningServer, str]) -> None:
    running, _ = guarded
    async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        error = await expect_status(
            stub.Check(health_pb2.HealthCheckRequest(service="s" * HEALTH_MESSAGE_BYTES)),
            grpc.StatusCode.RESOURCE_EXHAUSTED,
        )
    assert f"Check takes at most {HEALTH_MESSAGE_BYTES}" in (error.details() or "")


async def test_a_malformed_health_check_is_invalid_argument_not_unknown(guarded: tuple[RunningServer, str]) -> None:
    running, _ = guarded
    async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        raw = channel.unary_unary(CHECK, request_serializer=None, response_deserializer=None)
        await expect_status(raw(b"\x0a\x02\xff\xfe"), grpc.StatusCode.INVALID_ARGUMENT)  # `service`: not UTF-8


def _buf_curl_accept(port: int, token: str, *reflect: str) -> subprocess.CompletedProcess[str]:
    body = {"namespace": "buf/ns", "event_key": new_token(), "event_type": "t", "payload": "eyJhIjogMX0="}
    return subprocess.run(
        ["npx", "--no-install", "buf", "curl", "--protocol", "grpc", "--http2-prior-knowledge",
         "-H", f"authorization: Bearer {token}", *reflect,
         f"http://127.0.0.1:{port}/inboxd.v1.InboxService/Accept", "-d", json.dumps(body)],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


async def test_buf_curl_reaches_reflection_with_the_token_it_sends_as_the_docs_say(
    guarded: tuple[RunningServer, str],
) -> None:
    running, edge = guarded
    # buf curl blocks; the server answers from this very event loop, so it runs in a thread.
    without = await asyncio.to_thread(_buf_curl_accept, running.port, edge)
    assert without.returncode != 0
    # buf hides reflection's UNAUTHENTICATED behind this: the docs quote it.
    assert 'failed to find service named "inboxd.v1.InboxService"' in without.stderr
    answer = await asyncio.to_thread(_buf_curl_accept, running.port, edge, "--reflect-header", "*")
    assert answer.returncode == 0, answer.stderr
    assert json.loads(answer.stdout)["outcome"] == "ACCEPT_OUTCOME_ACCEPTED"
