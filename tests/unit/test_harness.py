"""The harness's wait for a server's serving line holds its deadline, whatever the process does."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.harness import await_serving_line


def _printing(*lines: str, then_sleep: float = 0) -> subprocess.Popen[str]:
    script = f"import sys, time\nfor line in {list(lines)!r}:\n    print(line, flush=True)\ntime.sleep({then_sleep})"
    return subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)


def test_the_serving_line_gives_host_and_port() -> None:
    proc = _printing("starting", "inboxd serving on 127.0.0.1:40123")
    try:
        assert await_serving_line(proc, timeout=60) == ("127.0.0.1", 40123)
    finally:
        proc.kill()
        proc.wait()


def test_a_silent_server_fails_at_the_deadline_not_when_it_exits() -> None:
    # Reading stdout on the caller's thread blocked until the process wrote or
    # exited: a server hung before its serving line hung the test run with it.
    proc = _printing(then_sleep=120)
    try:
        with pytest.raises(RuntimeError, match="did not print its serving line"):
            await_serving_line(proc, timeout=0.5)
        assert proc.poll() is None, "the deadline passed while the process still ran"
    finally:
        proc.kill()
        proc.wait()


def test_a_server_that_exits_first_is_named_with_its_exit_code() -> None:
    proc = _printing("inboxd: refusing to start")
    with pytest.raises(RuntimeError, match="exited with 0 before serving"):
        await_serving_line(proc, timeout=60)
