"""`inboxd serve --workers 2`: what the parent makes claimable wakes Claims waiting in its children.

The parent serves no Claims, but it runs the lease rescuer (and the
console's Replay): its wake-ups reach the children through PostgreSQL
NOTIFY, which it only sends. The fallback poll is off, so a waiting Claim
that gets its event was woken by a signal.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.integration.helpers import accept_request, seconds
from tests.integration.procs import Serve, stop_stray_postgres
from tests.integration.test_workers import LONG_WAIT, serving_workers, start_waiting_claim


@pytest.fixture(scope="module")
async def rescuing_workers(migrated_url: str) -> AsyncIterator[Serve]:
    folder = Path(tempfile.mkdtemp(prefix="inboxd-workers-wakeups-"))
    os.chmod(folder, 0o755)
    try:
        async with serving_workers(
            folder,
            migrated_url,
            INBOXD_FALLBACK_POLL="1h",
            # The parent rescues leases the moment they expire.
            INBOXD_RESCUE_INTERVAL="200ms",
            INBOXD_RESCUE_GRACE="0s",
            INBOXD_MAX_WAITING_CLAIMS_PER_CALLER="1",
        ) as serve:
            yield serve
    finally:
        stop_stray_postgres(folder / "postgres")
        shutil.rmtree(folder, ignore_errors=True)


async def test_an_event_the_parents_rescuer_puts_back_wakes_a_claim_waiting_in_a_child(
    rescuing_workers: Serve, ns: str
) -> None:
    async with grpc.aio.insecure_channel(rescuing_workers.target) as chan:
        stub = InboxServiceStub(chan)
        await stub.Accept(accept_request(ns, "abandoned"))
        claimed = await stub.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], lease=seconds(1)))
        assert [e.event_key for e in claimed.events] == ["abandoned"]
        # It looks while the lease runs, finds nothing, and waits: only a wake-up can end its wait early.
        call = await start_waiting_claim(stub, ns, LONG_WAIT)
        answer = await asyncio.wait_for(call, LONG_WAIT / 2)
        assert [(e.event_key, e.attempt) for e in answer.events] == [("abandoned", 2)]
