"""`inboxd accept` sends a JSON Lines export through Accept again: idempotent, checked whole before anything is sent."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from inboxd.serving.server import RunningServer
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub


def inboxd_accept(port: int, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "inboxd", "accept", "--target", f"127.0.0.1:{port}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_an_export_is_accepted_then_found_duplicate(
    server: RunningServer, inbox: InboxServiceStub, ns: str, tmp_path: Path
) -> None:
    export = tmp_path / "gap.jsonl"
    export.write_text(
        json.dumps({"event_key": "evt_1", "event_type": "charge.succeeded", "payload": {"id": "evt_1", "amount": 5}})
        + "\n\n"
        + json.dumps({"event_key": "evt_2", "event_type": "charge.refunded", "payload": {"id": "evt_2"},
                      "metadata": {"source": "restore"}})
        + "\n"
    )  # fmt: skip
    first = await asyncio.to_thread(inboxd_accept, server.port, str(export), "--namespace", ns)
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == ["accepted", ns, "evt_1", "accepted", ns, "evt_2"]
    again = await asyncio.to_thread(inboxd_accept, server.port, str(export), "--namespace", ns)
    assert again.stdout.split() == ["duplicate", ns, "evt_1", "duplicate", ns, "evt_2"]
    assert "2 events sent: 2 duplicate" in again.stderr
    claimed = await inbox.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], max_events=10))
    assert sorted((e.event_key, e.event_type) for e in claimed.events) == [
        ("evt_1", "charge.succeeded"), ("evt_2", "charge.refunded")
    ]  # fmt: skip
    assert json.loads(claimed.events[0].payload) in ({"id": "evt_1", "amount": 5}, {"id": "evt_2"})


async def test_raw_provider_events_from_stdin_take_key_and_type_from_named_fields(
    server: RunningServer, inbox: InboxServiceStub, ns: str
) -> None:
    raw = json.dumps({"id": "evt_9", "type": "invoice.paid", "data": {"object": {"total": 7}}})
    done = await asyncio.to_thread(
        inboxd_accept, server.port, "--namespace", ns, "--key-field", "id", "--type-field", "type", stdin=raw + "\n"
    )
    assert done.returncode == 0, done.stderr
    claimed = await inbox.Claim(inbox_pb2.ClaimRequest(namespaces=[ns]))
    assert (claimed.events[0].event_key, claimed.events[0].event_type) == ("evt_9", "invoice.paid")
    assert json.loads(claimed.events[0].payload) == json.loads(raw), "the whole line is the payload"


async def test_a_bad_line_sends_nothing_and_a_dry_run_sends_nothing(
    server: RunningServer, inbox: InboxServiceStub, ns: str, tmp_path: Path
) -> None:
    export = tmp_path / "gap.jsonl"
    good = json.dumps({"event_key": "k1", "event_type": "t", "payload": {}})
    export.write_text(good + "\n" + json.dumps({"event_type": "t", "payload": {}}) + "\n")
    bad = await asyncio.to_thread(inboxd_accept, server.port, str(export), "--namespace", ns)
    assert bad.returncode == 2
    assert "line 2: 'event_key' is missing or not a string; nothing sent" in bad.stderr
    export.write_text(good + "\n")
    dry = await asyncio.to_thread(inboxd_accept, server.port, str(export), "--namespace", ns, "--dry-run")
    assert dry.returncode == 0 and f"would send  {ns}  k1  t  2 bytes" in dry.stdout
    assert not (await inbox.Claim(inbox_pb2.ClaimRequest(namespaces=[ns]))).events, "nothing was accepted"
