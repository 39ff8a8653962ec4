"""What one call can make the server hold: a bounded total per message, and sizes grpc can take."""

from __future__ import annotations

import json
from dataclasses import replace

import grpc
import pytest

from inboxd.config.settings import ConfigError, Settings, load_settings
from inboxd.serving.server import MAX_BATCH_TOTAL_BYTES, max_message_bytes, start_server
from inboxd.store.database import Database
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import NO_RESCUER
from tests.integration.helpers import accept_request, expect_status

MiB = 1024 * 1024
# grpc takes its message limits as a C int.
C_INT_MAX = 2**31 - 1


def _big_events(ns: str, count: int, size: int) -> list[inbox_pb2.AcceptRequest]:
    filler = "x" * (size - 32)
    return [accept_request(ns, f"k{i}", {"fill": filler}) for i in range(count)]


def _total(events: list[inbox_pb2.AcceptRequest]) -> int:
    return inbox_pb2.AcceptBatchRequest(events=events).ByteSize()


async def test_an_accept_batch_beyond_the_total_limit_is_refused_by_size(inbox: InboxServiceStub, ns: str) -> None:
    # Every event is within the 1 MiB payload limit; only the total is too much.
    events = _big_events(ns, MAX_BATCH_TOTAL_BYTES // (900 * 1024) + 2, 900 * 1024)
    assert _total(events) > MAX_BATCH_TOTAL_BYTES
    error = await expect_status(
        inbox.AcceptBatch(inbox_pb2.AcceptBatchRequest(events=events)), grpc.StatusCode.RESOURCE_EXHAUSTED
    )
    assert "larger than max" in (error.details() or "")


async def test_an_accept_batch_within_the_total_limit_is_accepted(inbox: InboxServiceStub, ns: str) -> None:
    events = _big_events(ns, MAX_BATCH_TOTAL_BYTES // (900 * 1024) - 2, 900 * 1024)
    answer = await inbox.AcceptBatch(inbox_pb2.AcceptBatchRequest(events=events))
    assert len(answer.results) == len(events)


def test_no_payload_limit_the_settings_allow_overflows_grpcs_int() -> None:
    settings = load_settings({"INBOXD_MAX_PAYLOAD_BYTES": "64MiB"})
    assert max_message_bytes(settings) <= C_INT_MAX


def test_a_size_grpc_cannot_take_is_refused_with_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="INBOXD_MAX_PAYLOAD_BYTES"):
        max_message_bytes(Settings(max_payload_bytes=3 * 1024 * MiB))


async def test_a_64_mib_payload_limit_starts_and_takes_a_payload_over_the_batch_total(db: Database, ns: str) -> None:
    settings = replace(
        load_settings({"INBOXD_MAX_PAYLOAD_BYTES": "64MiB"}), listen="127.0.0.1:0", rescue_interval=NO_RESCUER
    )
    running = await start_server(settings, db)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = InboxServiceStub(channel)
            body = json.dumps({"fill": "x" * (MAX_BATCH_TOTAL_BYTES + MiB)}).encode()
            answer = await stub.Accept(accept_request(ns, "big", body))
            assert answer.outcome == inbox_pb2.ACCEPT_OUTCOME_ACCEPTED
    finally:
        await running.stop(1.0)
