"""Fixtures and helpers for the operator tests: an admin stub on the clocked server, finished events."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest

from inboxd.serving.server import RunningServer
from inboxd_client.v1 import admin_pb2_grpc, inbox_pb2, types_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.harness import REPO
from tests.integration.helpers import accept_request
from tests.integration.test_claims import claim_one, fenced


@pytest.fixture(scope="session")
async def clocked_admin(clocked_server: RunningServer) -> AsyncIterator[admin_pb2_grpc.InboxAdminServiceStub]:
    """InboxAdminService on the server whose time is the `clock` fixture."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{clocked_server.port}") as chan:
        yield admin_pb2_grpc.InboxAdminServiceStub(chan)


async def completed_event(work: InboxServiceStub, ns: str, key: str, payload: Any = None) -> inbox_pb2.ClaimedEvent:
    """Accepts, claims and completes one event; returns its (now ended) claim."""
    await work.Accept(accept_request(ns, key, payload))
    event = await claim_one(work, ns)
    await work.Complete(inbox_pb2.CompleteRequest(**fenced(event)))
    return event


async def dead_lettered_event(work: InboxServiceStub, ns: str, key: str, error: str = "bad schema") -> None:
    """Accepts, claims and fails one event permanently."""
    await work.Accept(accept_request(ns, key))
    event = await claim_one(work, ns)
    answer = await work.Fail(inbox_pb2.FailRequest(**fenced(event), error=error, permanent=True))
    assert answer.state == types_pb2.EVENT_STATE_DEAD_LETTERED


@dataclass(frozen=True)
class CliResult:
    code: int
    stdout: str
    stderr: str


async def run_cli(*args: str, env: dict[str, str] | None = None) -> CliResult:
    """`python -m inboxd ARGS` in a subprocess (in a thread, so the in-process server keeps serving)."""
    code, stdout, stderr = await run_cli_bytes(*args, env=env)
    return CliResult(code, stdout.decode(), stderr)


async def run_cli_bytes(*args: str, env: dict[str, str] | None = None) -> tuple[int, bytes, str]:
    """As run_cli, with stdout as the bytes the process wrote (`show --raw`)."""

    def run() -> subprocess.CompletedProcess[bytes]:
        clean = {k: v for k, v in os.environ.items() if not k.startswith("INBOXD_")}
        return subprocess.run(
            [sys.executable, "-m", "inboxd", *args],
            check=False,
            capture_output=True,
            timeout=60,
            cwd=REPO,
            env={**clean, **(env or {})},
        )

    done = await asyncio.to_thread(run)
    return done.returncode, done.stdout, done.stderr.decode()
