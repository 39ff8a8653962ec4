"""The signature schemes a route may name, with defaults for the providers we know.

A route names a scheme; any field a preset sets can still be overridden in the
route's ``[routes.hmac]`` table or by the route's own source settings.

Where the provider's public notes leave a detail open, the preset states its
assumption in a comment; override it in the route if your contract differs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from inboxd_edge.signatures import HmacScheme

VerifierKind = Literal["standard-webhooks", "stripe", "hmac", "twilio"]


@dataclass(frozen=True)
class Preset:
    """What a scheme name stands for: which verifier, and default sources for the route."""

    verifier: VerifierKind
    hmac: HmacScheme | None = None
    # Route field -> source text, used when the route does not set the field.
    defaults: Mapping[str, str] = field(default_factory=dict)


PRESETS: Mapping[str, Preset] = {
    # webhook-id is "the same when the same webhook is resent" (Standard Webhooks spec): the logical event id.
    "standard-webhooks": Preset(
        "standard-webhooks",
        defaults={"event_key": "header:webhook-id", "event_type": "body:/type"},
    ),
    # Stripe's evt_ id names one event of one type and is kept across retries.
    "stripe": Preset("stripe", defaults={"event_key": "body:/id", "event_type": "body:/type"}),
    # A bare HMAC-SHA256 scheme: every field comes from the route.
    "hmac": Preset("hmac"),
    # Mailera: two signature header names, a timestamp header, the event type and delivery in headers.
    # Assumed: HMAC-SHA256 over "{timestamp}.{body}", lowercase hex, optional "sha256=" prefix.
    # The delivery header names an attempt, not the event: it goes to metadata (never to the key).
    # X-MailHub-Event is not signed, so it cannot name the event's type: a route sets event_type itself
    # (const: on a route per event type, each with its own secret, or a body: source).
    "mailera": Preset(
        "hmac",
        HmacScheme(
            signature_headers=("X-MailHub-Signature", "X-Mailera-Signature"),
            timestamp_header="X-MailHub-Timestamp",
            signed_content="{timestamp}.{body}",
            encoding="hex",
            signature_prefix="sha256=",
        ),
        defaults={"delivery_id": "header:X-MailHub-Delivery"},
    ),
    # HideMy.world signs "the timestamp and raw body" with HMAC-SHA256 in X-HideMy-Signature.
    # Assumed: the timestamp header is X-HideMy-Timestamp, joined as "{timestamp}.{body}", lowercase hex.
    "hidemy-world": Preset(
        "hmac",
        HmacScheme(
            signature_headers=("X-HideMy-Signature",),
            timestamp_header="X-HideMy-Timestamp",
            signed_content="{timestamp}.{body}",
            encoding="hex",
            signature_prefix="sha256=",
        ),
    ),
    # Twilio signs the public URL it called and the sorted form fields (twilio_signature.py); nothing else.
    # MessageSid (SmsSid is its old name, same value) names one message across retries. Twilio sends no
    # type: a route sets event_type (const:message.received; status callbacks: body:MessageStatus with
    # key_includes_type, so each status of one message is its own event). The idempotency token names
    # an attempt, unsigned: metadata only.
    "twilio": Preset(
        "twilio",
        defaults={"event_key": "body:MessageSid", "delivery_id": "header:I-Twilio-Idempotency-Token"},
    ),
    # Slack: "v0=" + hex HMAC-SHA256 of "v0:{X-Slack-Request-Timestamp}:{body}", the timestamp held to the
    # route's tolerance (Slack's own advice is 5 minutes, the default). The defaults fit a slash command's
    # form: trigger_id is minted once per invocation and the command names what was asked. An Events API
    # route (JSON) sets event_key = "body:/event_id" and event_type = "body:/event/type" instead.
    "slack": Preset(
        "hmac",
        HmacScheme(
            signature_headers=("X-Slack-Signature",),
            timestamp_header="X-Slack-Request-Timestamp",
            signed_content="v0:{timestamp}:{body}",
            encoding="hex",
            signature_prefix="v0=",
        ),
        defaults={"event_key": "body:trigger_id", "event_type": "body:command"},
    ),
    # GitHub: "sha256=" + hex HMAC-SHA256 of the body, no timestamp. X-GitHub-Delivery and X-GitHub-Event
    # are not signed, and the body names no event id: the key is the body's SHA-256 (a redelivery resends
    # the same bytes), the delivery GUID goes to metadata, and a route sets event_type (const:, one
    # webhook and secret per event type).
    "github": Preset(
        "hmac",
        HmacScheme(signature_headers=("X-Hub-Signature-256",), signed_content="{body}", signature_prefix="sha256="),
        defaults={"event_key": "digest:sha256", "delivery_id": "header:X-GitHub-Delivery"},
    ),
    # Shopify: base64 HMAC-SHA256 of the body, no timestamp. X-Shopify-Topic and X-Shopify-Webhook-Id are
    # not signed: the key is the body's SHA-256 (a retry resends the same bytes), the webhook id goes to
    # metadata, and a route sets event_type (const:).
    "shopify": Preset(
        "hmac",
        HmacScheme(signature_headers=("X-Shopify-Hmac-Sha256",), signed_content="{body}", encoding="base64"),
        defaults={"event_key": "digest:sha256", "delivery_id": "header:X-Shopify-Webhook-Id"},
    ),
}
