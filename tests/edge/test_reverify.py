"""A delivery's signature verified again from the claimed event alone, with the provider's own library.

Each delivery is signed the provider's way (Twilio's RequestValidator, Slack's
SignatureVerifier, the standardwebhooks library, Stripe's, GitHub's and
Shopify's documented HMACs), accepted through a real edge in front of a real
inboxd, claimed back, and verified again using nothing but what Claim
returned: the payload bytes, the content type and the metadata.
"""

from __future__ import annotations

import hashlib
import hmac
import time
import uuid
from urllib.parse import parse_qsl, urlencode

import aiohttp
from google.protobuf.duration_pb2 import Duration
from slack_sdk.signature import SignatureVerifier
from standardwebhooks.webhooks import Webhook
from twilio.request_validator import RequestValidator  # type: ignore[import-untyped]  # twilio ships no types

from inboxd.store.database import Database
from inboxd_client.v1 import inbox_pb2, inbox_pb2_grpc
from inboxd_edge.serve import RunningEdge
from tests.edge.rig import (
    FORM,
    GITHUB_SECRET,
    SHOPIFY_NAMESPACE,
    SHOPIFY_SECRET,
    SLACK_SECRET,
    STD_ACCOUNTS,
    STRIPE_NEW_SECRET,
    TWILIO_PUBLIC_URL,
    TWILIO_TOKEN,
    post,
    sign_github,
    sign_shopify,
    sign_standard,
    sign_stripe,
    std_account,
    stored_events,
)

SIG = "inboxd.signature."


async def claim_one(inbox: inbox_pb2_grpc.InboxServiceStub, namespace: str) -> inbox_pb2.ClaimedEvent:
    """The one event `namespace` holds, claimed with a lease long enough that no later test takes it."""
    answer = await inbox.Claim(inbox_pb2.ClaimRequest(namespaces=[namespace], lease=Duration(seconds=600)))
    [event] = answer.events
    assert isinstance(event, inbox_pb2.ClaimedEvent)
    return event


def sms(account: str) -> dict[str, str]:
    return {
        "MessageSid": f"SM{uuid.uuid4().hex}",
        "AccountSid": account,
        "From": "+15550001",
        "Body": "Ça va? 50% & more=yes",
        "NumMedia": "0",
    }


async def test_a_twilio_form_is_claimed_byte_exact_and_verifies_again_with_twilios_validator(
    edge: RunningEdge, http: aiohttp.ClientSession, inbox: inbox_pb2_grpc.InboxServiceStub
) -> None:
    params = sms(f"AC{uuid.uuid4().hex}")
    body = urlencode(params).encode()
    # Twilio signs the URL it was given, query string and all; the edge sits behind a proxy under another name.
    query = "?source=sms&note=a%20b"
    signature = RequestValidator(TWILIO_TOKEN).compute_signature(TWILIO_PUBLIC_URL + query, params)
    reply = await post(http, f"{edge.url}/hooks/twilio{query}", body, {"X-Twilio-Signature": signature}, FORM)
    assert (reply.status, reply.outcome) == (200, "accepted")
    event = await claim_one(inbox, f"twilio/{params['AccountSid']}")
    assert (event.payload, event.content_type) == (body, FORM)
    assert (event.event_key, event.event_type) == (params["MessageSid"], "message.received")
    fields = dict(parse_qsl(event.payload.decode(), keep_blank_values=True))
    url = event.metadata[SIG + "url"]
    assert url == TWILIO_PUBLIC_URL + query
    assert RequestValidator(TWILIO_TOKEN).validate(url, fields, event.metadata[SIG + "x-twilio-signature"])
    # Twilio's retry resends the same bytes: a duplicate, judged by its bytes.
    again = await post(http, f"{edge.url}/hooks/twilio{query}", body, {"X-Twilio-Signature": signature}, FORM)
    assert (again.status, again.outcome) == (200, "duplicate")


async def test_a_tampered_twilio_form_is_refused_and_nothing_is_stored(
    edge: RunningEdge, http: aiohttp.ClientSession, db: Database
) -> None:
    params = sms(f"AC{uuid.uuid4().hex}")
    signature = RequestValidator(TWILIO_TOKEN).compute_signature(TWILIO_PUBLIC_URL, params)
    tampered = urlencode({**params, "Body": "send the money"}).encode()
    reply = await post(http, f"{edge.url}/hooks/twilio", tampered, {"X-Twilio-Signature": signature}, FORM)
    assert (reply.status, reply.outcome) == (401, "unauthenticated")
    assert await stored_events(db, f"twilio/{params['AccountSid']}") == {}


def slash_command(team: str) -> bytes:
    fields = {"token": "x", "team_id": team, "command": "/deploy", "text": "prod now", "trigger_id": uuid.uuid4().hex}
    return urlencode(fields).encode()


async def test_a_slack_slash_command_is_claimed_byte_exact_and_verifies_again_with_slack_sdk(
    edge: RunningEdge, http: aiohttp.ClientSession, inbox: inbox_pb2_grpc.InboxServiceStub
) -> None:
    team = f"T{uuid.uuid4().hex[:10]}"
    body = slash_command(team)
    stamp = str(int(time.time()))
    signature = SignatureVerifier(SLACK_SECRET).generate_signature(timestamp=stamp, body=body)
    assert signature is not None
    headers = {"X-Slack-Signature": signature, "X-Slack-Request-Timestamp": stamp}
    content_type = FORM + "; charset=utf-8"
    reply = await post(http, f"{edge.url}/hooks/slack", body, headers, content_type)
    assert (reply.status, reply.outcome) == (200, "accepted")
    event = await claim_one(inbox, f"slack/{team}")
    assert (event.payload, event.content_type, event.event_type) == (body, content_type, "/deploy")
    md = event.metadata
    verifier = SignatureVerifier(SLACK_SECRET)
    assert verifier.is_valid(
        body=event.payload, timestamp=md[SIG + "x-slack-request-timestamp"], signature=md[SIG + "x-slack-signature"]
    )


async def test_a_tampered_slack_form_is_refused_and_nothing_is_stored(
    edge: RunningEdge, http: aiohttp.ClientSession, db: Database
) -> None:
    team = f"T{uuid.uuid4().hex[:10]}"
    body = slash_command(team)
    stamp = str(int(time.time()))
    signature = SignatureVerifier(SLACK_SECRET).generate_signature(timestamp=stamp, body=body)
    assert signature is not None
    headers = {"X-Slack-Signature": signature, "X-Slack-Request-Timestamp": stamp}
    reply = await post(http, f"{edge.url}/hooks/slack", body.replace(b"prod", b"dev"), headers, FORM)
    assert (reply.status, reply.outcome) == (401, "unauthenticated")
    assert await stored_events(db, f"slack/{team}") == {}


async def test_github_json_with_its_own_whitespace_is_claimed_byte_exact_and_its_hmac_verifies_again(
    edge: RunningEdge, http: aiohttp.ClientSession, inbox: inbox_pb2_grpc.InboxServiceStub
) -> None:
    repo = f"acme/{uuid.uuid4().hex[:8]}"
    body = b'{"action":"opened",  "issue": {"id": 7, "title": "caf\\u00e9"},\n "repository": {"full_name": "'
    body += repo.encode() + b'"}}'
    headers = {**sign_github(body), "X-GitHub-Delivery": str(uuid.uuid4()), "X-GitHub-Event": "issues"}
    reply = await post(http, f"{edge.url}/hooks/github", body, headers)
    assert (reply.status, reply.outcome) == (200, "accepted")
    event = await claim_one(inbox, f"github/{repo.replace('/', '%2F')}")
    assert (event.payload, event.content_type) == (body, "application/json")
    assert event.event_key == hashlib.sha256(body).hexdigest()
    assert event.metadata["delivery_id"] == headers["X-GitHub-Delivery"]
    expected = "sha256=" + hmac.new(GITHUB_SECRET.encode(), event.payload, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(expected, event.metadata[SIG + "x-hub-signature-256"])


async def test_shopify_json_is_claimed_byte_exact_and_its_hmac_verifies_again(
    edge: RunningEdge, http: aiohttp.ClientSession, inbox: inbox_pb2_grpc.InboxServiceStub
) -> None:
    body = b'{"id": "' + uuid.uuid4().hex.encode() + b'", "b": 1, "a": 2, "b": 3}'
    reply = await post(
        http, f"{edge.url}/hooks/shopify", body, {**sign_shopify(body), "X-Shopify-Topic": "orders/create"}
    )
    assert (reply.status, reply.outcome) == (200, "accepted")
    event = await claim_one(inbox, SHOPIFY_NAMESPACE)
    assert (event.payload, event.content_type) == (body, "application/json")
    assert sign_shopify(event.payload, SHOPIFY_SECRET) == {
        "X-Shopify-Hmac-Sha256": event.metadata[SIG + "x-shopify-hmac-sha256"]
    }


async def test_an_xml_body_is_forwarded_unread_and_claimed_byte_exact_with_its_content_type(
    edge: RunningEdge, http: aiohttp.ClientSession, inbox: inbox_pb2_grpc.InboxServiceStub
) -> None:
    # Shopify can deliver XML: no body: source can read it, so the key is its digest and the type the route's.
    body = b'<?xml version="1.0"?>\n<order><id>' + uuid.uuid4().hex.encode() + b"</id><note>a &amp; b</note></order>"
    content_type = "application/xml; charset=utf-8"
    reply = await post(http, f"{edge.url}/hooks/shopify", body, sign_shopify(body), content_type)
    assert (reply.status, reply.outcome) == (200, "accepted")
    event = await claim_one(inbox, SHOPIFY_NAMESPACE)
    assert (event.payload, event.content_type) == (body, content_type)
    assert (event.event_key, event.event_type) == (hashlib.sha256(body).hexdigest(), "orders/create")
    assert sign_shopify(event.payload) == {"X-Shopify-Hmac-Sha256": event.metadata[SIG + "x-shopify-hmac-sha256"]}


async def test_standard_webhooks_and_stripe_json_verify_again_with_their_signers_from_the_claimed_event(
    edge: RunningEdge, http: aiohttp.ClientSession, inbox: inbox_pb2_grpc.InboxServiceStub
) -> None:
    acct = std_account()
    body = b'{"type":"invoice.paid",   "data":{"z":1,"a":[1,2]}}'
    reply = await post(http, f"{edge.url}/hooks/std/{acct}", body, sign_standard(body, "msg_rv", account=acct))
    assert (reply.status, reply.outcome) == (200, "accepted")
    event = await claim_one(inbox, f"std/{acct}")
    assert event.payload == body
    names = ("webhook-id", "webhook-timestamp", "webhook-signature")
    Webhook(STD_ACCOUNTS[acct]).verify(event.payload, {name: event.metadata[SIG + name] for name in names})

    account = f"acct_{uuid.uuid4().hex[:8]}"
    body = b'{"id": "evt_1", "type": "payment_intent.succeeded",\t"account": "' + account.encode() + b'"}'
    reply = await post(http, f"{edge.url}/hooks/stripe", body, sign_stripe(body, STRIPE_NEW_SECRET))
    assert (reply.status, reply.outcome) == (200, "accepted")
    event = await claim_one(inbox, f"stripe/{account}")
    assert event.payload == body
    stamp, mac = (part.split("=", 1)[1] for part in event.metadata[SIG + "stripe-signature"].split(","))
    expected = hmac.new(STRIPE_NEW_SECRET.encode(), stamp.encode() + b"." + event.payload, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(expected, mac)
