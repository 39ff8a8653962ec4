"""Connections are bounded: idle and half-open ones are closed, a cap leaves descriptors for the rest.

inboxd runs in a process of its own; its descriptors are counted in /proc/PID/fd.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import resource
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from inboxd.config.settings import ConfigError, Settings, load_settings
from inboxd.serving.cli import build_parser
from inboxd.serving.connections import RESERVED_DESCRIPTORS, OutOfDescriptorsLog, connection_cap
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.harness import ServerProcess, await_serving_line
from tests.integration.helpers import accept_request, captured_logs
from tests.integration.procs import poll

HALF_OPEN = 40
IDLE = 40
# What a held connection costs the server: one socket.
ROOM = 10


def descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _own_channel(target: str) -> grpc.Channel:
    # A subchannel pool of its own: a connection of its own.
    return grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])


@contextmanager
def idle_connections(target: str, count: int) -> Iterator[list[grpc.Channel]]:
    """`count` connections that each answered one health check and then sit idle."""
    with ExitStack() as stack:
        channels = [stack.enter_context(_own_channel(target)) for _ in range(count)]
        for channel in channels:
            health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        yield channels


@contextmanager
def half_open_connections(target: str, count: int) -> Iterator[list[socket.socket]]:
    """`count` TCP connections that never send a byte (no HTTP/2 preface, no TLS hello)."""
    host, _, port = target.rpartition(":")
    with ExitStack() as stack:
        yield [stack.enter_context(socket.create_connection((host, int(port)))) for _ in range(count)]


async def test_idle_and_half_open_connections_are_closed_and_new_callers_are_served(migrated_url: str) -> None:
    server = await asyncio.to_thread(
        ServerProcess(
            database_url=migrated_url, env={"INBOXD_CONNECTION_IDLE": "1s", "INBOXD_HANDSHAKE_TIMEOUT": "1s"}
        ).start
    )
    assert server.proc is not None
    pid = server.proc.pid
    try:
        baseline = descriptors(pid)
        with half_open_connections(server.target, HALF_OPEN), idle_connections(server.target, IDLE):
            held = descriptors(pid)
            assert held >= baseline + IDLE  # the idle ones were surely open once they answered

            async def closed() -> int | None:
                count = descriptors(pid)
                return count if count <= baseline + ROOM else None

            # The clients still hold their ends: only the server can have let go.
            after = await poll(closed, within=30.0)
            print(f"\ndescriptors: {baseline} at start, {held} with {HALF_OPEN + IDLE} held, {after} once closed")
        async with grpc.aio.insecure_channel(server.target) as channel:
            answer = await InboxServiceStub(channel).Accept(accept_request("conn/ns", "after"), timeout=10)
            assert answer.outcome == inbox_pb2.ACCEPT_OUTCOME_ACCEPTED
    finally:
        server.kill()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _serve_with_descriptor_limit(
    database_url: str, soft: int, hard: int, env: dict[str, str], stderr: Path | None = None
) -> subprocess.Popen[str]:
    """`inboxd serve` with RLIMIT_NOFILE set to (soft, hard) in its own process only; stderr to `stderr`."""
    start = (
        "import os, resource, sys;"
        f"resource.setrlimit(resource.RLIMIT_NOFILE, ({soft}, {hard}));"
        "os.execv(sys.executable, [sys.executable, '-m', 'inboxd', 'serve'])"
    )
    full_env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "INBOXD_LISTEN": "127.0.0.1:0",
        "INBOXD_RESCUE_INTERVAL": "0",
        **env,
    }
    with ExitStack() as stack:
        err = stack.enter_context(stderr.open("w")) if stderr else subprocess.DEVNULL
        command = [sys.executable, "-c", start]
        return subprocess.Popen(command, env=full_env, stdout=subprocess.PIPE, stderr=err, text=True)


def _limits(pid: int) -> tuple[int, int]:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return int(soft), int(hard)
    raise AssertionError("no open-files limit")


async def test_the_soft_descriptor_limit_is_raised_to_the_hard_one_at_start(migrated_url: str) -> None:
    proc = _serve_with_descriptor_limit(migrated_url, 300, 4096, {})
    try:
        await asyncio.to_thread(await_serving_line, proc, timeout=60.0)
        assert _limits(proc.pid) == (4096, 4096)
    finally:
        proc.kill()
        proc.wait()


async def test_held_connections_under_a_300_descriptor_limit_leave_descriptors_and_metrics_answering(
    migrated_url: str,
) -> None:
    metrics_port = _free_port()
    proc = _serve_with_descriptor_limit(migrated_url, 300, 300, {"INBOXD_METRICS_LISTEN": f"127.0.0.1:{metrics_port}"})
    try:
        _, port = await asyncio.to_thread(await_serving_line, proc, timeout=60.0)
        target = f"127.0.0.1:{port}"
        with ExitStack() as stack:
            # 290 connections from a client without a token: as many as the server takes, the rest refused.
            channels = [stack.enter_context(_own_channel(target)) for _ in range(290)]
            for channel in channels:
                channel.subscribe(lambda _state: None, try_to_connect=True)
            cap = connection_cap(Settings(), 300)

            async def settled() -> int | None:
                count = descriptors(proc.pid)
                return count if count >= cap else None

            await poll(settled, within=30.0)
            held = descriptors(proc.pid)
            print(f"\ndescriptors: {held} of 300 with 290 connections attempted (cap {cap})")
            assert held < 300 - RESERVED_DESCRIPTORS // 2
            scrape = await asyncio.to_thread(
                urllib.request.urlopen, f"http://127.0.0.1:{metrics_port}/metrics", timeout=10
            )
            with scrape:
                assert b"inboxd_" in scrape.read()
    finally:
        proc.kill()
        proc.wait()


async def test_a_server_out_of_descriptors_says_so_once_not_a_traceback_per_accept(
    migrated_url: str, tmp_path: Path
) -> None:
    console_port = _free_port()
    log = tmp_path / "stderr.log"
    proc = _serve_with_descriptor_limit(
        migrated_url, 300, 300, {"INBOXD_CONSOLE_LISTEN": f"127.0.0.1:{console_port}"}, stderr=log
    )
    try:
        await asyncio.to_thread(await_serving_line, proc, timeout=60.0)
        with ExitStack() as stack:
            # The console's connections are not capped: enough of them exhaust the descriptors.
            for _ in range(300):
                stack.enter_context(socket.create_connection(("127.0.0.1", console_port), timeout=5))

            async def exhausted() -> int | None:
                return 1 if descriptors(proc.pid) >= 300 and "out of" in log.read_text() else None

            await poll(exhausted, within=30.0)
            await asyncio.sleep(2.0)  # asyncio retries its accepts every second: let it try again
    finally:
        proc.kill()
        proc.wait()
    text = log.read_text()
    print(f"\nstderr: {len(text)} bytes, {text.count('out of system resource')} failed accepts reported")
    assert text.count("out of file descriptors") == 1
    assert len(text) < 64 * 1024


def test_running_out_of_descriptors_is_logged_once_per_interval_not_per_accept() -> None:
    now = [0.0]
    seen: list[dict[str, Any]] = []
    handler = OutOfDescriptorsLog(lambda _loop, context: seen.append(context), interval=60.0, clock=lambda: now[0])
    loop = asyncio.new_event_loop()
    out_of_fds = {"message": "socket.accept() out of system resource", "exception": OSError(errno.EMFILE, "x")}
    try:
        with captured_logs(logging.ERROR) as logs:
            for second in range(120):
                now[0] = float(second)
                handler(loop, out_of_fds)
            handler(loop, {"message": "something else"})
    finally:
        loop.close()
    assert logs.getvalue().count("out of file descriptors") == 2
    assert "59 more such errors" in logs.getvalue()
    assert seen == [{"message": "something else"}]


@pytest.mark.parametrize("limit", [300, 1024, None])
def test_the_connection_cap_leaves_the_pool_and_the_reserve_their_descriptors(limit: int | None) -> None:
    settings = Settings()
    cap = connection_cap(settings, limit)
    if limit is None:
        assert cap == settings.max_connections
    else:
        assert cap + settings.pool_size + RESERVED_DESCRIPTORS <= limit
    assert resource.RLIMIT_NOFILE  # the limit these numbers are about


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("INBOXD_CONNECTION_IDLE", "0"),
        ("INBOXD_CONNECTION_AGE", "30d"),
        ("INBOXD_HANDSHAKE_TIMEOUT", "0"),
        ("INBOXD_MAX_CONNECTIONS", "0"),
        ("INBOXD_MAX_STREAMS_PER_CONNECTION", "0"),
    ],
)
def test_a_connection_bound_grpc_cannot_take_is_refused_naming_it(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=name):
        load_settings({name: value})


def test_the_connection_bounds_are_flags_of_serve_too() -> None:
    args = build_parser().parse_args(["serve", "--connection-idle", "30s", "--max-streams-per-connection", "4096"])
    assert args.connection_idle == "30s"
    assert args.max_streams_per_connection == "4096"
