"""Scenario 2: distinct event types for one message stay distinct events, through the real edge.

Mailera sends `message.received` and `message.junk` for one Message-ID, and its
ids do not tell the two apart, so the edge's Mailera routes set
`key_includes_type`. Its event-type header is not signed, so each type has a
route (and a secret) of its own that fixes the type. Every notification is delivered twice (a retry: another
delivery id, a fresh timestamp and signature), all at once, and some messages
arrive under two subscriptions, which name two sources. Each (subscription,
message, type) must be one row of its own type, ACCEPTED once and DUPLICATE
on its retry, never CONFLICT. A control route without `key_includes_type`
shows what the setting prevents: there the junk notice collides with the
received one (CONFLICT) and one of the two events is never processed.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from inboxd_edge.config import config_from_data
from inboxd_edge.serve import RunningEdge, start_edge
from tests.reliability import ledger
from tests.reliability.rig import conflicts, query, serving

SCENARIO = "distinct types"
SECRET = "mailera-reliability-secret"
TYPES = ("message.received", "message.junk")
MESSAGES = 150
OVERLAPPING = 50  # of them, also delivered under a second subscription
NAIVE_MESSAGES = 30
REQUESTS_IN_FLIGHT = 64


# This run's namespaces: mailera/RUN/<subscription> and, for the control, naive/RUN/<subscription>.
RUN = uuid.uuid4().hex[:10]


def secret(kind: str, event_type: str) -> str:
    """Each route its own secret: a delivery signed for one type's route verifies on no other."""
    return f"{SECRET}-{kind}-{event_type}"


def url(edge: RunningEdge, kind: str, event_type: str) -> str:
    return f"{edge.url}/hooks/{kind}/{event_type}"


def routes(target: str) -> dict[str, Any]:
    def route(kind: str, event_type: str, *, keyed: bool) -> dict[str, Any]:
        return {
            "name": f"{kind}-{event_type}",
            "path": f"/hooks/{kind}/{event_type}",
            "scheme": "mailera",
            "secrets": [secret(kind, event_type)],
            "namespace": f"{kind}/{RUN}/{{subscription}}",
            "vars": {"subscription": "body:/subscription_id"},
            "event_key": "body:/message/message_id",
            "event_type": f"const:{event_type}",
            "message_id": "body:/message/message_id",
            "allowed_types": [event_type],
            "key_includes_type": keyed,
        }

    return {
        "inboxd": {"target": target, "deadline_seconds": 10.0},
        # The control ("naive") is the mistake the setting exists for: the provider's id alone as the key.
        "routes": [route(kind, t, keyed=kind == "mailera") for kind in ("mailera", "naive") for t in TYPES],
    }


@pytest.fixture
async def edge(reliable_url: str) -> AsyncIterator[RunningEdge]:
    async with serving(reliable_url) as server:
        running = await start_edge(config_from_data(routes(server.target), {}), listen="127.0.0.1:0")
        try:
            yield running
        finally:
            await running.stop()


def body(subscription: str, message_id: str) -> bytes:
    return json.dumps(
        {
            "subscription_id": subscription,
            "mailbox_id": "mbx_1",
            "message": {"message_id": message_id, "from": "sender@example.com", "subject": "Quarterly report"},
        }
    ).encode()


def mailera_headers(raw: bytes, kind: str, event_type: str) -> dict[str, str]:
    """Signed the way the Mailera preset verifies: HMAC-SHA256 over "{timestamp}.{body}", hex."""
    stamp = str(int(time.time()))
    mac = hmac.new(secret(kind, event_type).encode(), stamp.encode() + b"." + raw, hashlib.sha256).hexdigest()
    return {
        "Content-Type": "application/json",
        "X-MailHub-Signature": f"sha256={mac}",
        "X-MailHub-Timestamp": stamp,
        "X-MailHub-Event": event_type,
        "X-MailHub-Delivery": f"dlv_{uuid.uuid4().hex}",
    }


async def deliver(
    http: aiohttp.ClientSession, edge: RunningEdge, kind: str, raw: bytes, event_type: str
) -> tuple[int, str]:
    headers = mailera_headers(raw, kind, event_type)
    async with http.post(url(edge, kind, event_type), data=raw, headers=headers) as response:
        answer = await response.json()
        return response.status, str(answer.get("outcome"))


async def test_received_and_junk_for_one_message_stay_two_events_through_the_edge(
    edge: RunningEdge, reliable_url: str
) -> None:
    tally = ledger.open_tally(SCENARIO)
    rng = ledger.rng_for(SCENARIO)
    message_ids = [f"<{i}.{uuid.uuid4().hex[:8]}@mail.example.com>" for i in range(MESSAGES)]
    # (subscription, message id, type): one logical event each.
    logical = [("sub_a", m, t) for m in message_ids for t in TYPES]
    logical += [("sub_b", m, t) for m in message_ids[:OVERLAPPING] for t in TYPES]
    deliveries = [event for event in logical for _ in range(2)]
    rng.shuffle(deliveries)

    limit = asyncio.Semaphore(REQUESTS_IN_FLIGHT)
    answers: dict[tuple[str, str, str], list[tuple[int, str]]] = {event: [] for event in logical}
    async with aiohttp.ClientSession() as http:

        async def one(event: tuple[str, str, str]) -> None:
            subscription, message_id, event_type = event
            async with limit:
                reply = await deliver(http, edge, "mailera", body(subscription, message_id), event_type)
            answers[event].append(reply)

        await asyncio.gather(*(one(event) for event in deliveries))

        # The control: the same two notices through a route keyed on the Message-ID alone.
        naive: list[str] = []
        for message_id in message_ids[:NAIVE_MESSAGES]:
            for event_type in TYPES:
                status, outcome = await deliver(http, edge, "naive", body("sub_a", message_id), event_type)
                assert status == 200
                naive.append(outcome)

    def ns(subscription: str) -> str:
        return f"mailera/{RUN}/{subscription}"

    def key(message_id: str, event_type: str) -> str:
        return f"{event_type}:{message_id}"

    expected = {(ns(s), key(m, t)): t for s, m, t in logical}
    rows = await query(
        reliable_url,
        "SELECT namespace, event_key, event_type, message_id FROM inbox_events WHERE namespace = ANY(%s)",
        ([ns("sub_a"), ns("sub_b")],),
    )
    stored = {(str(n), str(k)): (str(t), str(m)) for n, k, t, m in rows}
    accepted = Counter(
        f"{ns(s)}|{key(m, t)}" for (s, m, t), replies in answers.items() for _, o in replies if o == "accepted"
    )
    acknowledged = {
        f"{ns(s)}|{key(m, t)}" for (s, m, t), replies in answers.items() if any(c == 200 for c, _ in replies)
    }

    tally.events += len(logical)
    tally.deliveries += len(deliveries) + len(naive)
    tally.account(acknowledged, {f"{n}|{k}" for n, k in stored})
    tally.extra(accepted)
    tally.duplicated += len(set(stored) - set(expected))
    tally.duplicated += await conflicts(reliable_url, ns("sub_a")) + await conflicts(reliable_url, ns("sub_b"))
    tally.note("events under a second subscription", OVERLAPPING * len(TYPES))
    tally.note("control route collisions (CONFLICT)", naive.count("conflict"))

    statuses = Counter(code for replies in answers.values() for code, _ in replies)
    assert statuses == {200: len(deliveries)}, f"the edge answered {dict(statuses)}"
    for event, replies in answers.items():
        assert sorted(o for _, o in replies) == ["accepted", "duplicate"], (event, replies)
    assert set(stored) == set(expected), "rows differ from one per (subscription, message, type)"
    for where, event_type in expected.items():
        assert stored[where][0] == event_type, f"{where} stored as {stored[where][0]}"
        assert stored[where][1] == where[1].split(":", 1)[1], "the Message-ID is kept as message_id"
    # Without the type in the key, the junk notice is refused as a conflict: one event silently lost.
    assert naive == ["accepted", "conflict"] * NAIVE_MESSAGES
    naive_rows = await query(
        reliable_url, "SELECT count(*) FROM inbox_events WHERE namespace = %s", (f"naive/{RUN}/sub_a",)
    )
    assert naive_rows[0][0] == NAIVE_MESSAGES
    tally.close()
