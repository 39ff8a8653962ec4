"""A worker with no logging set up says what it does on stderr: a line per start, stop and failure, none per event."""

from __future__ import annotations

import asyncio
import sys

from inboxd.serving.server import RunningServer
from inboxd_client import AsyncInboxClient
from tests.client.helpers import accept

# The README's worker, with nothing of logging configured (or, with "configured", the application's own).
WORKER = """
import asyncio, logging, sys
from inboxd_client import AsyncInboxClient, EventContext, PermanentError, Worker

if sys.argv[3] == "configured":
    logging.basicConfig(level=logging.WARNING, format="app: %(message)s")


async def main(target: str, namespace: str) -> None:
    async with AsyncInboxClient(target) as client:
        seen = []

        async def handle(ctx: EventContext) -> None:
            seen.append(ctx.event_key)
            if len(seen) == 2:
                worker.stop()
            if ctx.event_key == "boom":
                raise PermanentError("no use for it")

        worker = Worker(client, handle, namespaces=[namespace], concurrency=1, wait=1.0)
        await worker.run(handle_signals=False)


asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


async def _run_worker(server: RunningServer, client: AsyncInboxClient, ns: str, logging_setup: str) -> str:
    await accept(client, ns, "fine")
    await accept(client, ns, "boom")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", WORKER, f"127.0.0.1:{server.port}", ns, logging_setup,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, stderr = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, stderr.decode()
    return stderr.decode()


async def test_an_unconfigured_worker_logs_its_start_its_failures_and_its_stop(
    server: RunningServer, client: AsyncInboxClient, ns: str
) -> None:
    said = await _run_worker(server, client, ns, "unconfigured")
    lines = [line for line in said.splitlines() if " INFO inboxd_client.worker worker " in line]
    assert len(lines) == 3, said
    assert f"started: namespaces {ns}, up to 1 events at a time" in lines[0]
    assert "stopping: no more claims" in lines[1]
    assert "stopped: 2 claimed, 1 completed, 0 failed, 1 dead-lettered, 0 released" in lines[2]
    assert f"WARNING inboxd_client.worker handler failed for {ns}/boom" in said
    assert f"{ns}/fine" not in said, "no line per event"


async def test_an_application_that_configured_logging_keeps_control(
    server: RunningServer, client: AsyncInboxClient, ns: str
) -> None:
    said = await _run_worker(server, client, ns, "configured")
    assert "started: namespaces" not in said
    assert f"app: handler failed for {ns}/boom" in said
