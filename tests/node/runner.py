"""Runs Node test files (clients/node/test) against the session's inboxd and reads their TAP summary."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from inboxd.serving.server import RunningServer
from tests.harness import REPO

NODE_PACKAGE = REPO / "clients" / "node"
NODE_TESTS = NODE_PACKAGE / "test"
NODE_TIMEOUT_SECONDS = 120.0


def node_or_fail() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH: the Node worker tests need Node 20+")
    if not (NODE_PACKAGE / "node_modules" / "@grpc" / "grpc-js").is_dir():
        pytest.fail("clients/node has no node_modules: run `npm ci --prefix clients/node` (make setup)")
    return node


def tap_count(output: str, name: str) -> int:
    match = re.search(rf"^# {name} (\d+)$", output, re.MULTILINE)
    assert match, f"no '# {name}' line in node's output:\n{output[-4000:]}"
    return int(match.group(1))


async def run_node_tests(server: RunningServer, paths: Sequence[Path], env: Mapping[str, str] = {}) -> str:
    """`node --test` on `paths` with INBOXD_TARGET set to `server`; fails unless every test ran and passed."""
    node = node_or_fail()
    full_env = {**os.environ, "INBOXD_TARGET": f"127.0.0.1:{server.port}", **env}
    # Run as a child of this event loop, which keeps serving the in-process inboxd meanwhile.
    proc = await asyncio.create_subprocess_exec(
        node,
        "--test",
        "--test-reporter=tap",
        *(str(path) for path in paths),
        cwd=NODE_PACKAGE,
        env=full_env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        raw, _ = await asyncio.wait_for(proc.communicate(), NODE_TIMEOUT_SECONDS)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    output = raw.decode(errors="replace")
    assert proc.returncode == 0, f"node --test failed:\n{output[-8000:]}"
    assert tap_count(output, "fail") == 0
    assert tap_count(output, "skipped") == 0, "a Node test was skipped: its environment is missing"
    return output
