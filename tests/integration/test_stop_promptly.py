"""SIGTERM stops as soon as nothing holds an event: a waiting Claim answers at once, and the last line says so."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import grpc

from inboxd_client.v1 import inbox_pb2, inbox_pb2_grpc
from tests.harness import serve_on_free_port
from tests.integration.helpers import accept_request, seconds

GRACE_SECONDS = 60


async def test_a_waiting_claim_does_not_hold_the_stop_for_the_grace(database_url: str, ns: str, tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    env = {"INBOXD_SHUTDOWN_GRACE": f"{GRACE_SECONDS}s", "INBOXD_RESCUE_INTERVAL": "0"}
    proc, port = await asyncio.to_thread(serve_on_free_port, database_url, env, timeout=60, stderr_log=log)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = inbox_pb2_grpc.InboxServiceStub(channel)
            await stub.Accept(accept_request(f"{ns}/other", "k"))
            waiting = asyncio.ensure_future(stub.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], wait=seconds(50))))
            await asyncio.sleep(0.5)  # the Claim is waiting: nothing is due in its namespace
            began = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            answer = await waiting
            code = await asyncio.to_thread(proc.wait, GRACE_SECONDS + 30)
            took = time.monotonic() - began
        assert list(answer.events) == [], "it answered what it had: nothing"
        assert code == 0
        # Before: the stop waited out the grace or the wait (10.07 s of a 10 s grace), the Claim got UNAVAILABLE.
        assert took < GRACE_SECONDS / 2, f"the stop took {took:.1f} s of a {GRACE_SECONDS} s grace"
        assert '"msg": "inboxd stopped"' in log.read_text().splitlines()[-1]
    finally:
        proc.kill()
        proc.wait()
