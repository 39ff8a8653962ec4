"""The structured log: JSON lines that follow an event by a hash, never by its key, payload or tokens."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import AsyncIterator, Iterator

import grpc
import pytest

from inboxd.config.settings import Settings
from inboxd.config.tokens import TokenRegistry
from inboxd.observability.logs import event_ref
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd_client.v1 import admin_pb2, admin_pb2_grpc, inbox_pb2, inbox_pb2_grpc, types_pb2
from tests.conftest import NO_RESCUER
from tests.integration.helpers import accept_request, captured_logs, expect_status, seconds
from tests.integration.test_auth import Tokens, write_tokens
from tests.integration.test_claims import fenced

PAYLOAD_MARKER = "payload-SECRET-7f3a"
KEY = "alice.secret-key@example.com:evt-991"
WRONG_TOKEN = "ibx_not-a-real-token-5c2e"


@pytest.fixture(scope="module")
def tokens(tmp_path_factory: pytest.TempPathFactory) -> Tokens:
    return write_tokens(tmp_path_factory.mktemp("log-tokens") / "tokens.toml")


@pytest.fixture(scope="module")
async def guarded(db: Database, tokens: Tokens) -> AsyncIterator[RunningServer]:
    running = await start_server(
        Settings(listen="127.0.0.1:0", rescue_interval=NO_RESCUER), db, registry=TokenRegistry(tokens.file)
    )
    yield running
    await running.stop(1.0)


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    """Every log record, at every level, formatted as inboxd formats it in production."""
    with captured_logs(logging.DEBUG) as out:
        yield out


async def test_no_log_line_holds_a_payload_a_token_or_a_raw_event_key(
    guarded: RunningServer, tokens: Tokens, ns: str, captured: io.StringIO
) -> None:
    md = [("authorization", f"Bearer {tokens.root}")]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{guarded.port}") as chan:
        work = inbox_pb2_grpc.InboxServiceStub(chan)
        admin = admin_pb2_grpc.InboxAdminServiceStub(chan)
        payload = {"to": KEY, "note": PAYLOAD_MARKER}
        await work.Accept(accept_request(ns, KEY, payload), metadata=md)
        await work.Accept(accept_request(ns, KEY, payload), metadata=md)  # duplicate
        await work.Accept(accept_request(ns, KEY, {"note": PAYLOAD_MARKER + "-2"}), metadata=md)  # conflict
        await expect_status(
            work.Accept(accept_request(ns, KEY, payload), metadata=[("authorization", f"Bearer {WRONG_TOKEN}")]),
            grpc.StatusCode.UNAUTHENTICATED,
        )
        first = (await work.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], lease=seconds(30)), metadata=md)).events[0]
        await work.RecordActionOutcome(
            inbox_pb2.RecordActionOutcomeRequest(
                **fenced(first), action="mail:v1", state=types_pb2.ACTION_STATE_INTENDED, detail=PAYLOAD_MARKER
            ),
            metadata=md,
        )
        await work.RecordActionOutcome(
            inbox_pb2.RecordActionOutcomeRequest(
                **fenced(first), action="mail:v1", state=types_pb2.ACTION_STATE_SUCCEEDED, external_ref="msg-77"
            ),
            metadata=md,
        )
        await work.Fail(
            inbox_pb2.FailRequest(**fenced(first), error=f"bad {PAYLOAD_MARKER}", retry_after=seconds(0)), metadata=md
        )
        second = (await work.Claim(inbox_pb2.ClaimRequest(namespaces=[ns]), metadata=md)).events[0]
        await expect_status(
            work.Complete(inbox_pb2.CompleteRequest(**fenced(first)), metadata=md), grpc.StatusCode.ABORTED
        )
        await work.Complete(inbox_pb2.CompleteRequest(**fenced(second)), metadata=md)
        await admin.Replay(admin_pb2.ReplayRequest(namespace=ns, event_key=KEY, reason="re-run"), metadata=md)
        third = (await work.Claim(inbox_pb2.ClaimRequest(namespaces=[ns]), metadata=md)).events[0]
        await work.Release(inbox_pb2.ReleaseRequest(**fenced(third)), metadata=md)

    lines = captured.getvalue().splitlines()
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    ref = event_ref(ns, KEY)
    mine = [r for r in records if r.get("event") == ref]
    messages = [r["msg"] for r in mine]
    # The log is there and follows the event: the test would notice if nothing were logged.
    for expected in ("accept accepted", "accept duplicate", "accept conflict", "event claimed", "action recorded",
                     "event failed, will retry", "stale claim rejected", "event completed", "event replayed",
                     "event released"):  # fmt: skip
        assert expected in messages, f"no {expected!r} line in {messages}"
    assert any(r.get("idempotency_key", "").startswith("idk_") and r.get("external_ref") == "msg-77" for r in mine)
    text = captured.getvalue()
    secrets = {
        "payload": PAYLOAD_MARKER,
        "event key": KEY,
        "key's local part": "alice.secret-key",
        "bearer token": tokens.root,
        "wrong bearer token": WRONG_TOKEN,
        **{f"claim token {i}": e.claim_token for i, e in enumerate((first, second, third))},
    }
    for what, secret in secrets.items():
        assert secret not in text, f"a log line holds the {what}"
