"""One delivery per preset, signed as the provider signs it: by its own library where one exists, else by its docs.

Signed by the providers' libraries: standardwebhooks, svix, stripe, slack_sdk,
twilio, PyNaCl (Discord's and Telnyx's Ed25519). Published vectors: GitHub's
("It's a Secret to Everybody" over "Hello, World!") and SendGrid's (its
eventwebhook library's test key, signature and timestamp). The rest are written
out from each provider's documentation; tests/edge/provider_libraries.py then
runs the provider's own verifier on the delivery where one exists on PyPI.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import stripe
from nacl.signing import SigningKey
from slack_sdk.signature import SignatureVerifier
from standardwebhooks.webhooks import Webhook as StandardWebhook
from svix.webhooks import Webhook as SvixWebhook
from twilio.request_validator import RequestValidator  # type: ignore[import-untyped]  # twilio ships no types

SECRET = "catalog-secret-value"
WHSEC = "whsec_" + base64.b64encode(b"catalog-standard-webhooks-secret").decode()
URL = "https://hooks.example.test/catalog"
ED_KEY = SigningKey(hashlib.sha256(b"catalog-ed25519").digest())
SENDGRID_KEY = (
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4Cwrq"
    "DqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA=="
)
SENDGRID_SIGNATURE = "MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlxFDWYNH2j/0="
GITHUB_DOCS_SECRET = "It's a Secret to Everybody"


@dataclass
class Delivery:
    """A signed delivery, the route settings its preset needs, and the same delivery with one signed byte changed."""

    body: bytes
    headers: dict[str, str]
    route: dict[str, Any] = field(default_factory=dict)
    url: str = ""
    now: float = field(default_factory=time.time)
    tampered: bytes | None = None
    tampered_headers: dict[str, str] | None = None

    def changed(self) -> tuple[bytes, dict[str, str]]:
        if self.tampered_headers is not None:
            return self.body, self.tampered_headers
        if self.tampered is not None:
            return self.tampered, self.headers
        # One byte of the body, in the middle: covered by every scheme that signs the body.
        middle = len(self.body) // 2
        return self.body[:middle] + bytes([self.body[middle] ^ 0x01]) + self.body[middle + 1 :], self.headers


def _stamp() -> str:
    return str(int(time.time()))


def _hex(algorithm: str, content: bytes, key: str = SECRET) -> str:
    return hmac.new(key.encode(), content, algorithm).hexdigest()


def _b64(algorithm: str, content: bytes, key: str = SECRET) -> str:
    return base64.b64encode(hmac.new(key.encode(), content, algorithm).digest()).decode()


JSON_BODY = b'{"id": "evt_catalog_1", "type": "catalog.tested", "data": {"n": 1}}'
SECRETS = {"secrets": [SECRET]}


def standard(library: Callable[[str], Any]) -> Callable[[], Delivery]:
    def sign() -> Delivery:
        at = datetime.fromtimestamp(int(time.time()), tz=UTC)
        prefix = "svix" if library is SvixWebhook else "webhook"
        signature = library(WHSEC).sign("msg_catalog", at, JSON_BODY.decode())
        headers = {
            f"{prefix}-id": "msg_catalog",
            f"{prefix}-timestamp": str(int(at.timestamp())),
            f"{prefix}-signature": signature,
        }
        return Delivery(JSON_BODY, headers, {"secrets": [WHSEC]})

    return sign


def stripe_signed() -> Delivery:
    header = stripe.WebhookSignature.generate_signature_header(JSON_BODY.decode(), SECRET, timestamp=int(time.time()))
    return Delivery(JSON_BODY, {"Stripe-Signature": header}, SECRETS)


def slack_signed() -> Delivery:
    body, stamp = b"team_id=T1&command=%2Fdeploy&trigger_id=1.2", _stamp()
    signature = SignatureVerifier(SECRET).generate_signature(timestamp=stamp, body=body)
    return Delivery(body, {"X-Slack-Signature": str(signature), "X-Slack-Request-Timestamp": stamp}, SECRETS)


def twilio_signed() -> Delivery:
    fields = {"MessageSid": "SM1", "AccountSid": "AC1", "Body": "hi"}
    signature = RequestValidator(SECRET).compute_signature(URL, fields)
    route = {**SECRETS, "public_url": URL, "event_type": "const:message.received"}
    tampered = urlencode({**fields, "Body": "hj"}).encode()
    headers = {"X-Twilio-Signature": signature, "Content-Type": "application/x-www-form-urlencoded"}
    return Delivery(urlencode(fields).encode(), headers, route, URL, tampered=tampered)


def github_vector() -> Delivery:
    # GitHub's "Validating webhook deliveries" test values.
    signature = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    route = {"secrets": [GITHUB_DOCS_SECRET], "event_type": "const:push"}
    return Delivery(b"Hello, World!", {"X-Hub-Signature-256": signature}, route)


def ed25519(
    signature_header: str, timestamp_header: str, joiner: bytes, encode: Callable[[bytes], str]
) -> Callable[[], Delivery]:
    """Signed with PyNaCl; the route's public key coded as the provider hands it out (the signature's coding)."""

    def sign() -> Delivery:
        stamp = _stamp()
        signature = ED_KEY.sign(stamp.encode() + joiner + JSON_BODY).signature
        headers = {signature_header: encode(signature), timestamp_header: stamp}
        return Delivery(JSON_BODY, headers, {"public_key": encode(ED_KEY.verify_key.encode())})

    return sign


def sendgrid_vector() -> Delivery:
    body = json.dumps(
        {"category": "example_payload", "event": "test_event", "message_id": "message_id"}, separators=(",", ":")
    )
    headers = {
        "X-Twilio-Email-Event-Webhook-Signature": SENDGRID_SIGNATURE,
        "X-Twilio-Email-Event-Webhook-Timestamp": "1588788367",
    }
    return Delivery(body.encode(), headers, {"public_key": SENDGRID_KEY}, now=1588788367)


def graph() -> Delivery:
    item = {"subscriptionId": "s", "changeType": "created", "resource": "r", "clientState": SECRET}
    tampered = json.dumps({"value": [{**item, "clientState": SECRET[:-1] + "X"}]}).encode()
    return Delivery(
        json.dumps({"value": [item]}).encode(), {}, {"client_state_env": "CATALOG_STATE"}, tampered=tampered
    )


def gitlab() -> Delivery:
    body = b'{"object_kind": "push", "ref": "refs/heads/main"}'
    return Delivery(body, {"X-Gitlab-Token": SECRET}, SECRETS, tampered_headers={"X-Gitlab-Token": SECRET + "x"})


def mailgun() -> Delivery:
    stamp, token = _stamp(), "a8ce0edb2dd8301dee6c2405235584e45aa91d1e9f979f3de0"
    document = {
        "signature": {"timestamp": stamp, "token": token, "signature": _hex("sha256", (stamp + token).encode())},
        "event-data": {"id": "e1", "event": "delivered"},
    }
    tampered = json.dumps({**document, "signature": {**document["signature"], "token": token[:-1] + "1"}}).encode()
    return Delivery(json.dumps(document).encode(), {}, SECRETS, tampered=tampered)


def mandrill() -> Delivery:
    fields = {"mandrill_events": '[{"event": "send", "_id": "m1"}]'}
    content = (URL + "".join(k + v for k, v in sorted(fields.items()))).encode()
    route = {**SECRETS, "public_url": URL, "event_type": "const:events"}
    return Delivery(urlencode(fields).encode(), {"X-Mandrill-Signature": _b64("sha1", content)}, route, URL)


def hmac_body(
    header: str,
    algorithm: str = "sha256",
    encode: Callable[..., str] = _hex,
    prefix: str = "",
    body: bytes = JSON_BODY,
    **route: Any,
) -> Callable[[], Delivery]:
    def sign() -> Delivery:
        return Delivery(body, {header: prefix + encode(algorithm, body)}, {**SECRETS, **route})

    return sign


def stamped(header: str, stamp_header: str, template: bytes, prefix: str = "", **route: Any) -> Callable[[], Delivery]:
    def sign() -> Delivery:
        stamp = _stamp()
        content = template.replace(b"{t}", stamp.encode()).replace(b"{body}", JSON_BODY)
        return Delivery(
            JSON_BODY, {header: prefix + _hex("sha256", content), stamp_header: stamp}, {**SECRETS, **route}
        )

    return sign


def pairs(header: str, stamp_key: str, sig_key: str, separator: str, joiner: bytes) -> Callable[[], Delivery]:
    def sign() -> Delivery:
        stamp = _stamp()
        signature = _hex("sha256", stamp.encode() + joiner + JSON_BODY)
        return Delivery(JSON_BODY, {header: f"{stamp_key}={stamp}{separator}{sig_key}={signature}"}, SECRETS)

    return sign


def twitch() -> Delivery:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + ".123456789Z"
    body = b'{"subscription": {"type": "channel.follow"}, "event": {"user_id": "1"}}'
    signature = "sha256=" + _hex("sha256", b"msg-1" + stamp.encode() + body)
    headers = {
        "Twitch-Eventsub-Message-Id": "msg-1",
        "Twitch-Eventsub-Message-Timestamp": stamp,
        "Twitch-Eventsub-Message-Signature": signature,
    }
    return Delivery(body, headers, SECRETS)


def linear() -> Delivery:
    # The timestamp rides in the signed body, in milliseconds.
    body = json.dumps({"action": "create", "type": "Issue", "webhookTimestamp": int(time.time() * 1000)}).encode()
    return Delivery(body, {"Linear-Signature": _hex("sha256", body)}, SECRETS)


def hubspot() -> Delivery:
    body = b'[{"eventId": 1, "subscriptionType": "contact.creation", "portalId": 62515}]'
    stamp = str(int(time.time() * 1000))
    signature = _b64("sha256", b"POST" + URL.encode() + body + stamp.encode())
    headers = {"X-HubSpot-Signature-v3": signature, "X-HubSpot-Request-Timestamp": stamp}
    return Delivery(body, headers, {**SECRETS, "public_url": URL}, URL)


def url_body(header: str, algorithm: str, url_first: bool) -> Callable[[], Delivery]:
    def sign() -> Delivery:
        content = URL.encode() + JSON_BODY if url_first else JSON_BODY + URL.encode()
        return Delivery(JSON_BODY, {header: _b64(algorithm, content)}, {**SECRETS, "public_url": URL}, URL)

    return sign


TEMPLATE = {"signature_headers": ["X-Sig"], "signed_content": "{body}", "algorithm": "sha512"}

SIGNERS: dict[str, Callable[[], Delivery]] = {
    "standard-webhooks": standard(StandardWebhook),
    "svix": standard(SvixWebhook),
    "clerk": standard(SvixWebhook),
    "resend": standard(SvixWebhook),
    "stripe": stripe_signed,
    "hmac": hmac_body("X-Sig", "sha512", hmac=TEMPLATE, event_key="body:/id", event_type="body:/type"),
    "mailera": stamped(
        "X-MailHub-Signature", "X-MailHub-Timestamp", b"{t}.{body}", event_key="body:/id", event_type="body:/type"
    ),
    "hidemy-world": stamped(
        "X-HideMy-Signature", "X-HideMy-Timestamp", b"{t}.{body}", event_key="body:/id", event_type="body:/type"
    ),
    "twilio": twilio_signed,
    "slack": slack_signed,
    "github": github_vector,
    "shopify": hmac_body("X-Shopify-Hmac-Sha256", encode=_b64, event_type="const:orders/create"),
    "meta": hmac_body("X-Hub-Signature-256", prefix="sha256=", verify_token_env="CATALOG_VERIFY"),
    "zoom": stamped("x-zm-signature", "x-zm-request-timestamp", b"v0:{t}:{body}", prefix="v0="),
    "twitch": twitch,
    "microsoft-graph": graph,
    "discord": ed25519("X-Signature-Ed25519", "X-Signature-Timestamp", b"", lambda s: s.hex()),
    "telnyx": ed25519("telnyx-signature-ed25519", "telnyx-timestamp", b"|", lambda s: base64.b64encode(s).decode()),
    "sendgrid": sendgrid_vector,
    "paddle": pairs("Paddle-Signature", "ts", "h1", ";", b":"),
    "square": url_body("x-square-hmacsha256-signature", "sha256", url_first=True),
    "hubspot": hubspot,
    "linear": linear,
    "intercom": hmac_body("X-Hub-Signature", "sha1", prefix="sha1="),
    "sentry": hmac_body("Sentry-Hook-Signature"),
    "vercel": hmac_body("x-vercel-signature", "sha1"),
    "gitlab": gitlab,
    "mailgun": mailgun,
    "calendly": pairs("Calendly-Webhook-Signature", "t", "v1", ",", b"."),
    "typeform": hmac_body("Typeform-Signature", encode=_b64, prefix="sha256="),
    "pagerduty": hmac_body("X-PagerDuty-Signature", prefix="v1="),
    "woocommerce": hmac_body("X-WC-Webhook-Signature", encode=_b64, event_type="const:order.created"),
    "mandrill": mandrill,
    "lemon-squeezy": hmac_body("X-Signature"),
    "cal-com": hmac_body("X-Cal-Signature-256"),
    "mux": pairs("Mux-Signature", "t", "v1", ",", b"."),
    "trello": url_body("X-Trello-Webhook", "sha1", url_first=False),
}
ENVIRON = {"CATALOG_STATE": SECRET, "CATALOG_VERIFY": "catalog-verify-token"}
