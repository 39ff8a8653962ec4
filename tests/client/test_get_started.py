"""docs/get-started.md works as written: its Accept and its ten-line worker, run as shown, complete a Stripe event."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

from inboxd.serving.server import RunningServer
from inboxd.store.database import Database
from tests.client.helpers import eventually, read_event

PAGE = Path(__file__).resolve().parents[2] / "docs" / "get-started.md"
TARGET = "127.0.0.1:50051"
NAMESPACE = "stripe/acct_1"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", PAGE.read_text(), flags=re.DOTALL)


def _as_run_here(code: str, server: RunningServer, ns: str) -> str:
    """The page's code, pointed at this test's server and namespace: nothing else changes."""
    assert TARGET in code and NAMESPACE in code, "the page's example names its target and namespace"
    return code.replace(TARGET, f"127.0.0.1:{server.port}").replace(NAMESPACE, ns)


def test_the_worker_is_ten_lines_and_claims_the_namespace_the_accept_fills() -> None:
    accept, worker = _blocks("python")
    assert len([line for line in worker.splitlines() if line.strip()]) <= 10
    assert f'"{NAMESPACE}"' in accept and f'namespaces=["{NAMESPACE}"]' in worker


def test_the_port_make_run_serves_can_be_changed_and_buf_is_installed_before_use() -> None:
    text = PAGE.read_text()
    assert "INBOXD_LISTEN=" in text.split("## 2.")[0]
    shell = "\n".join(_blocks("sh"))
    lines = shell.splitlines()
    assert all("--no-install" in line for line in lines if re.search(r"\bnpx\b.*\bbuf\b", line))
    first_npm = next(i for i, line in enumerate(lines) if line.startswith("npm ci"))
    assert first_npm < next(i for i, line in enumerate(lines) if "buf curl" in line)


async def test_the_pages_accept_and_worker_complete_the_stripe_event(
    server: RunningServer, db: Database, ns: str, tmp_path: Path
) -> None:
    accept, worker = (_as_run_here(code, server, ns) for code in _blocks("python"))
    (tmp_path / "accept.py").write_text(accept)
    (tmp_path / "worker.py").write_text(worker)

    done = await asyncio.create_subprocess_exec(
        sys.executable, "accept.py", cwd=tmp_path, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(done.communicate(), timeout=30)
    assert done.returncode == 0, err.decode()
    assert out.decode().strip() == "ACCEPT_OUTCOME_ACCEPTED"

    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "worker.py",
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL,
    )
    try:

        async def completed() -> bool:
            return bool((await read_event(db, ns, "evt_1"))["state"] == "completed")

        await eventually(completed, "the page's worker completed evt_1", within=30)
    finally:
        proc.terminate()
        out, _ = await asyncio.wait_for(proc.communicate(), timeout=30)
    assert "handled payment_intent.succeeded evt_1" in out.decode()
