"""Strangers are refused on their metadata, before their bytes are read; each method reads only what it needs.

The memory test runs inboxd in a process of its own and reads that process's
resident set from /proc: what a stranger can make the server hold is counted
in bytes, not guessed from times.
"""

from __future__ import annotations

import asyncio
import functools
import multiprocessing
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from inboxd.api.admission import COMPLETIONS_MESSAGE_BYTES, MAX_CLAIM_FILTERS
from inboxd.config.settings import Settings
from inboxd.config.tokens import Scope, TokenRegistry, entry_toml, new_token
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import NO_RESCUER
from tests.harness import ServerProcess
from tests.integration.helpers import expect_status

MiB = 1024 * 1024
STRANGERS = 32
STRANGER_BYTES = 31 * MiB
# The target of issue 26: 32 such calls at once grow the server by less than this.
MOST_GROWTH_BYTES = 100 * 1000 * 1000
# Loose on purpose (a shared 2-core machine): a health check the loop could not answer for seconds fails it.
HEALTH_DEADLINE = 2.0


def _claim_naming(field: str, names: list[str]) -> inbox_pb2.ClaimRequest:
    request = inbox_pb2.ClaimRequest()
    getattr(request, field).extend(names)
    return request


def resident_bytes(pid: int) -> int:
    """VmRSS of process `pid`, from /proc/PID/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def _own_connection(target: str) -> grpc.aio.Channel:
    # A subchannel pool of its own: not the connection the strangers' calls share.
    return grpc.aio.insecure_channel(
        target, options=[("grpc.use_local_subchannel_pool", 1), ("grpc.max_send_message_length", 64 * MiB)]
    )


def check_health_until(stop: Any, target: str, answers: Any) -> None:
    """In a process of its own (the test's loop is busy sending): checks health every 20 ms until `stop` is set.

    Puts each answer's seconds on `answers`, then None; each must be SERVING within HEALTH_DEADLINE.
    """
    with grpc.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        stub.Check(health_pb2.HealthCheckRequest(), timeout=HEALTH_DEADLINE)  # connected before it counts
        answers.put(0.0)
        while not stop.is_set():
            started = time.perf_counter()
            answer = stub.Check(health_pb2.HealthCheckRequest(), timeout=HEALTH_DEADLINE)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING
            answers.put(time.perf_counter() - started)
            time.sleep(0.02)
    answers.put(None)


async def test_32_strangers_sending_31_mib_each_grow_the_server_by_under_100_mb(
    migrated_url: str, tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens.toml"
    edge = new_token()
    tokens.write_text(entry_toml("edge", edge, [Scope.ACCEPT], ["*"]))
    server = await asyncio.to_thread(
        ServerProcess(database_url=migrated_url, env={"INBOXD_TOKENS_FILE": str(tokens)}).start
    )
    assert server.proc is not None
    body = b"\x0a" * STRANGER_BYTES  # raw bytes: the server must not get as far as parsing them
    try:
        async with _own_connection(server.target) as channel:
            # Half without a token, half with a token that lacks the method's scope.
            unauthenticated = channel.unary_unary("/inboxd.v1.InboxService/AcceptBatch", None, None)
            unauthorised = channel.unary_unary("/inboxd.v1.InboxService/Claim", None, None)
            before = resident_bytes(server.proc.pid)
            spawn = multiprocessing.get_context("spawn")
            stop, answers = spawn.Event(), spawn.Queue()
            checker = spawn.Process(target=check_health_until, args=(stop, server.target, answers))
            checker.start()
            assert await asyncio.to_thread(answers.get, True, 60.0) == 0.0

            async def stranger(index: int) -> grpc.StatusCode:
                call = (
                    unauthenticated(body, timeout=60)
                    if index % 2
                    else unauthorised(body, timeout=60, metadata=[("authorization", f"Bearer {edge}")])
                )
                try:
                    await call
                except grpc.aio.AioRpcError as exc:
                    return exc.code()
                return grpc.StatusCode.OK

            started = time.perf_counter()
            try:
                codes = await asyncio.gather(*(stranger(i) for i in range(STRANGERS)))
            finally:
                stop.set()
            took = time.perf_counter() - started
            grown = resident_bytes(server.proc.pid) - before
            seconds = list(iter(functools.partial(answers.get, True, 60.0), None))
            checker.join(10)
    finally:
        server.kill()
    assert checker.exitcode == 0, "a health check failed or missed its deadline (its traceback is above)"
    assert set(codes) == {grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED}
    print(  # the real numbers, for the record (pytest -s)
        f"\nRSS grew {grown / 1e6:.1f} MB under {STRANGERS} x 31 MiB strangers, answered in {took:.2f} s; "
        f"{len(seconds)} health checks, slowest {max(seconds) * 1000:.1f} ms"
    )
    assert grown < MOST_GROWTH_BYTES, f"the server grew by {grown / 1e6:.0f} MB"


@pytest.fixture(scope="module")
async def guarded(db: Database, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[RunningServer, str]]:
    tokens = tmp_path_factory.mktemp("admission") / "tokens.toml"
    worker = new_token()
    tokens.write_text(entry_toml("worker", worker, [Scope.WORK], ["*"]))
    settings = replace(Settings(listen="127.0.0.1:0", tokens_file=tokens), rescue_interval=NO_RESCUER)
    running = await start_server(settings, db, registry=TokenRegistry(tokens))
    yield running, worker
    await running.stop(1.0)


async def test_a_claim_over_its_own_size_limit_is_refused_unparsed_though_the_batch_limit_is_larger(
    guarded: tuple[RunningServer, str],
) -> None:
    running, worker = guarded
    async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        request = inbox_pb2.ClaimRequest(worker_id="w" * (COMPLETIONS_MESSAGE_BYTES + 1))
        error = await expect_status(
            InboxServiceStub(channel).Claim(request, metadata=[("authorization", f"Bearer {worker}")]),
            grpc.StatusCode.RESOURCE_EXHAUSTED,
        )
    assert f"Claim takes at most {COMPLETIONS_MESSAGE_BYTES}" in (error.details() or "")


@pytest.mark.parametrize("field", ["namespaces", "event_types"])
async def test_a_claim_naming_more_than_100_of_a_list_is_refused_naming_the_field(
    inbox: InboxServiceStub, ns: str, field: str
) -> None:
    names = [f"{ns}/{i}" for i in range(MAX_CLAIM_FILTERS + 1)]
    error = await expect_status(inbox.Claim(_claim_naming(field, names)), grpc.StatusCode.INVALID_ARGUMENT)
    assert (error.details() or "").startswith(field)
    assert f"holds {MAX_CLAIM_FILTERS + 1} {field}" in (error.details() or "")


@pytest.mark.parametrize("field", ["namespaces", "event_types"])
async def test_a_claim_naming_100_of_a_list_is_taken(inbox: InboxServiceStub, ns: str, field: str) -> None:
    names = [f"{ns}/{i}" for i in range(MAX_CLAIM_FILTERS)]
    answer = await inbox.Claim(_claim_naming(field, names))
    assert list(answer.events) == []
