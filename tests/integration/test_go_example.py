"""The Go example (examples/go) from the contract alone: built with Debian's Go packages, run against inboxd.

The stubs come from protos/ at build time (scripts/go-example.sh), so a contract
change that breaks a Go client breaks this test; the packages are installed by
scripts/ensure-go.sh, as the project's set-up installs SPIN and Chromium.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from inboxd.serving.server import RunningServer
from inboxd.store.database import Database
from tests.harness import REPO

SCRIPTS = REPO / "scripts"


async def run(*command: str, timeout: float = 600.0) -> str:  # noqa: ASYNC109 - a subprocess's bound
    proc = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    text = out.decode()
    assert proc.returncode == 0, f"{' '.join(command)} exited {proc.returncode}:\n{text[-4000:]}"
    return text


@pytest.fixture(scope="module")
async def binary(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The example, built once for this file's tests (the packages installed first when missing)."""
    await run(str(SCRIPTS / "ensure-go.sh"))
    built = await run(str(SCRIPTS / "go-example.sh"), str(tmp_path_factory.mktemp("go-example")))
    return built.strip().splitlines()[-1]


async def test_the_go_example_accepts_claims_records_an_action_and_completes(
    server: RunningServer, db: Database, binary: str
) -> None:
    ns = f"examples/go-{uuid.uuid4().hex[:8]}"
    out = await run(binary, "-target", f"127.0.0.1:{server.port}", "-namespace", ns, "-key", "k1", timeout=60)
    assert "accepted k1: ACCEPT_OUTCOME_ACCEPTED" in out, out
    assert "completed k1" in out, out

    async def stored(conn: Any) -> tuple[Any, ...]:
        cur = await conn.execute(
            "SELECT e.state, e.disposition, a.action, a.state, a.external_ref = 'greeting-' || a.idempotency_key"
            " FROM inbox_events AS e JOIN inbox_actions AS a USING (namespace, event_key)"
            " WHERE e.namespace = %s AND e.event_key = 'k1'",
            (ns,),
        )
        return tuple(await cur.fetchall())

    assert await db.run(stored) == (("completed", "applied", "send-greeting:v1", "succeeded", True),)


async def test_the_go_example_fails_loudly_when_inboxd_refuses(server: RunningServer, binary: str) -> None:
    # An empty namespace is the caller's mistake: the example must exit non-zero naming it, not print success.
    proc = await asyncio.create_subprocess_exec(
        binary, "-target", f"127.0.0.1:{server.port}", "-namespace", "",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 1, (out, err)
    assert b"accept:" in err and b"InvalidArgument" in err and b"namespace" in err, err
