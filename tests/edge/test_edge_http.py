"""The edge over real HTTP in front of a real inboxd: what providers hear, and what inboxd then holds."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator

import aiohttp
import pytest

from inboxd.store.database import Database
from inboxd_edge.serve import RunningEdge
from tests.edge.rig import (
    HIDEMY_SECRET,
    MAILERA_JUNK_SECRET,
    MAILERA_SECRET,
    STD_MAX_BODY,
    STD_SECRET,
    STRIPE_NEW_SECRET,
    STRIPE_OLD_SECRET,
    as_body,
    post,
    sign_hmac,
    sign_standard,
    sign_stripe,
    std_account,
    stored_events,
)

account = std_account


async def test_a_standard_webhook_is_accepted_and_its_redelivery_is_a_duplicate_with_2xx(
    edge: RunningEdge, http: aiohttp.ClientSession, db: Database
) -> None:
    acct = account()
    url = f"{edge.url}/hooks/std/{acct}"
    body = as_body({"type": "invoice.paid", "data": {"id": "in_1", "amount": 500}})
    first = await post(http, url, body, sign_standard(body, "msg_1", account=acct))
    # The provider's retry: same webhook-id and body, a fresh timestamp and signature.
    again = await post(http, url, body, sign_standard(body, "msg_1", account=acct, at=time.time() + 1))
    assert (first.status, first.outcome) == (200, "accepted")
    assert (again.status, again.outcome) == (200, "duplicate")
    rows = await stored_events(db, f"std/{acct}")
    assert list(rows) == ["msg_1"]
    assert rows["msg_1"]["event_type"] == "invoice.paid"
    assert rows["msg_1"]["payload"] == {"type": "invoice.paid", "data": {"id": "in_1", "amount": 500}}


async def test_same_key_with_another_payload_is_a_conflict_still_answered_2xx(
    edge: RunningEdge, http: aiohttp.ClientSession, db: Database
) -> None:
    acct = account()
    url = f"{edge.url}/hooks/std/{acct}"
    original = as_body({"type": "invoice.paid", "data": {"amount": 1}})
    changed = as_body({"type": "invoice.paid", "data": {"amount": 2}})
    assert (await post(http, url, original, sign_standard(original, "msg_c", account=acct))).status == 200
    reply = await post(http, url, changed, sign_standard(changed, "msg_c", account=acct))
    assert (reply.status, reply.outcome) == (200, "conflict")
    assert (await stored_events(db, f"std/{acct}"))["msg_c"]["payload"] == {
        "type": "invoice.paid",
        "data": {"amount": 1},
    }


async def test_tampered_stale_and_unsigned_requests_get_401_and_store_nothing(
    edge: RunningEdge, http: aiohttp.ClientSession, db: Database
) -> None:
    acct = account()
    url = f"{edge.url}/hooks/std/{acct}"
    body = as_body({"type": "invoice.paid", "data": {"amount": 1}})
    tampered = as_body({"type": "invoice.paid", "data": {"amount": 1000}})
    attempts = {
        "tampered": (tampered, sign_standard(body, "m1", account=acct)),
        "stale": (body, sign_standard(body, "m2", account=acct, at=time.time() - 600)),
        "unsigned": (body, {"webhook-id": "m3", "webhook-timestamp": str(int(time.time()))}),
        "wrong secret": (body, sign_standard(body, "m4", secret="whsec_" + "QUJD" * 8)),
    }
    for name, (sent, headers) in attempts.items():
        reply = await post(http, url, sent, headers)
        assert (reply.status, reply.outcome) == (401, "unauthenticated"), name
    assert await stored_events(db, f"std/{acct}") == {}


async def test_stripe_signatures_from_either_rotated_secret_are_accepted(
    edge: RunningEdge, http: aiohttp.ClientSession, db: Database
) -> None:
    acct = f"acct_{account()}"
    url = f"{edge.url}/hooks/stripe"
    old = as_body({"id": "evt_old", "type": "payment_intent.succeeded", "account": acct})
    new = as_body({"id": "evt_new", "type": "payment_intent.succeeded", "account": acct})
    assert (await post(http, url, old, sign_stripe(old, STRIPE_OLD_SECRET))).outcome == "accepted"
    assert (await post(http, url, new, sign_stripe(new, STRIPE_NEW_SECRET))).outcome == "accepted"
    stale = await post(http, url, new, sign_stripe(new, STRIPE_NEW_SECRET, at=time.time() - 301))
    assert stale.status == 401
    assert set(await stored_events(db, f"stripe/{acct}")) == {"evt_old", "evt_new"}


async def test_mailera_received_and_junk_for_one_message_stay_two_events_keyed_without_delivery_id(
    edge: RunningEdge, http: aiohttp.ClientSession, db: Database
) -> None:
    subscription = f"sub_{uuid.uuid4().hex[:8]}"
    body = as_body({"subscription_id": subscription, "message": {"message_id": "<m1@example.com>"}})
    outcomes = []
    for kind, secret, delivery in (
        ("received", MAILERA_SECRET, "dlv_1"),
        ("junk", MAILERA_JUNK_SECRET, "dlv_2"),
        ("junk", MAILERA_JUNK_SECRET, "dlv_3"),
    ):
        stamp, signature = sign_hmac(body, secret)
        headers = {
            "X-Mailera-Signature": signature,
            "X-MailHub-Timestamp": stamp,
            # Unsigned, so never read: the route names the type.
            "X-MailHub-Event": "message.spoofed",
            "X-MailHub-Delivery": delivery,
        }
        outcomes.append((await post(http, f"{edge.url}/hooks/mailera/{kind}", body, headers)).outcome)
    assert outcomes == ["accepted", "accepted", "duplicate"]
    rows = await stored_events(db, f"mailera/{subscription}")
    assert set(rows) == {"message.received:<m1@example.com>", "message.junk:<m1@example.com>"}
    junk = rows["message.junk:<m1@example.com>"]
    # The first delivery's id is kept (metadata never counts on a repeat, and the original is untouched).
    assert junk["metadata"]["delivery_id"] == "dlv_2"
    assert junk["message_id"] == "<m1@example.com>"


async def test_hidemy_retry_with_a_new_delivery_time_is_a_duplicate(
    edge: RunningEdge, http: aiohttp.ClientSession, db: Database
) -> None:
    inbox = account()
    url = f"{edge.url}/hooks/hidemy"
    outcomes = []
    for delivered_at in (1000, 2000):
        document = {
            "inbox": inbox,
            "event": "email.received",
            "headers": {"message-id": "<x@y>"},
            "delivered_at": delivered_at,
        }
        body = as_body(document)
        stamp, signature = sign_hmac(body, HIDEMY_SECRET)
        headers = {"X-HideMy-Signature": signature, "X-HideMy-Timestamp": stamp}
        outcomes.append((await post(http, url, body, headers)).outcome)
    assert outcomes == ["accepted", "duplicate"]
    assert list(await stored_events(db, f"hidemy/{inbox}")) == ["<x@y>"]


async def test_a_body_over_the_route_limit_gets_413(edge: RunningEdge, http: aiohttp.ClientSession) -> None:
    body = as_body({"type": "invoice.paid", "pad": "x" * STD_MAX_BODY})
    acct = account()
    reply = await post(http, f"{edge.url}/hooks/std/{acct}", body, sign_standard(body, "big", account=acct))
    assert (reply.status, reply.outcome) == (413, "too_large")


async def test_a_chunked_body_over_the_limit_gets_413_without_a_content_length(
    edge: RunningEdge, http: aiohttp.ClientSession
) -> None:
    body = as_body({"type": "invoice.paid", "pad": "x" * STD_MAX_BODY})

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(body), 512):
            yield body[start : start + 512]

    acct = account()
    url = f"{edge.url}/hooks/std/{acct}"
    async with http.post(url, data=chunks(), headers=sign_standard(body, "chunked", account=acct)) as response:
        assert response.status == 413


async def test_a_signed_body_that_is_not_json_gets_400_and_a_missing_key_too(
    edge: RunningEdge, http: aiohttp.ClientSession
) -> None:
    acct = account()
    url = f"{edge.url}/hooks/std/{acct}"
    for body in (b"{not json", b'{"type": NaN}', b'{"no_type": 1}'):
        reply = await post(http, url, body, sign_standard(body, "m", account=acct))
        assert (reply.status, reply.outcome) == (400, "malformed"), body


async def test_an_event_type_the_route_does_not_take_gets_422_and_is_not_stored(
    edge: RunningEdge, http: aiohttp.ClientSession, db: Database
) -> None:
    acct = account()
    body = as_body({"type": "invoice.created"})
    reply = await post(http, f"{edge.url}/hooks/std/{acct}", body, sign_standard(body, "m", account=acct))
    assert (reply.status, reply.outcome) == (422, "unsupported_type")
    assert await stored_events(db, f"std/{acct}") == {}


async def test_payload_inboxd_refuses_gets_400_not_2xx(edge: RunningEdge, http: aiohttp.ClientSession) -> None:
    # Valid JSON that jsonb cannot hold: inboxd answers INVALID_ARGUMENT.
    body = b'{"type": "invoice.paid", "text": "nul \\u0000 here"}'
    acct = account()
    reply = await post(http, f"{edge.url}/hooks/std/{acct}", body, sign_standard(body, "m", account=acct))
    assert (reply.status, reply.outcome) == (400, "rejected")


async def test_logs_hold_neither_bodies_nor_secrets(
    edge: RunningEdge, http: aiohttp.ClientSession, caplog: pytest.LogCaptureFixture
) -> None:
    marker = f"private-{uuid.uuid4().hex}"
    body = as_body({"type": "invoice.paid", "note": marker})
    acct = account()
    with caplog.at_level(logging.DEBUG):
        await post(http, f"{edge.url}/hooks/std/{acct}", body, sign_standard(body, "m_log", account=acct))
        await post(http, f"{edge.url}/hooks/std/{acct}", body, sign_standard(body, "m_bad", secret="whsec_QUJD"))
    text = caplog.text
    assert 'route="std" status="200" outcome="accepted"' in text
    assert 'route="std" status="401"' in text
    for secret in (marker, STD_SECRET, STD_SECRET.removeprefix("whsec_"), "m_log"):
        assert secret not in text
