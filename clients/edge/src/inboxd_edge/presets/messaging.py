"""Messages, mail and voice: Twilio and the others that deliver to people."""

from __future__ import annotations

from collections.abc import Mapping

from inboxd_edge.asymmetric import AsymmetricScheme
from inboxd_edge.presets.base import Preset

PRESETS: Mapping[str, Preset] = {
    # Twilio signs the public URL it called and the sorted form fields (twilio_signature.py); nothing else.
    # MessageSid (SmsSid is its old name, same value) names one message across retries. Twilio sends no
    # type: a route sets event_type (const:message.received; status callbacks: body:MessageStatus with
    # key_includes_type, so each status of one message is its own event). The idempotency token names
    # an attempt, unsigned: metadata only.
    "twilio": Preset(
        "twilio",
        defaults={"event_key": "body:MessageSid", "delivery_id": "header:I-Twilio-Idempotency-Token"},
    ),
    # Telnyx (API v2): Ed25519 over "{telnyx-timestamp}|{body}", base64 in telnyx-signature-ed25519, the account's
    # public key; 5 minutes, as its SDKs. data.id names the event, data.event_type its type.
    "telnyx": Preset(
        "ed25519",
        asymmetric=AsymmetricScheme(
            "ed25519", "telnyx-signature-ed25519", "telnyx-timestamp", "{timestamp}|{body}", encoding="base64"
        ),
        defaults={"event_key": "body:/data/id", "event_type": "body:/data/event_type"},
        tolerance=300,
    ),
    # SendGrid's Event Webhook: ECDSA P-256 (SHA-256) over timestamp + body, base64 DER signature, the public key
    # as the dashboard gives it (base64 DER). A body is an array of events: each is its own, keyed by sg_event_id.
    # SendGrid names no tolerance: the default 5 minutes.
    "sendgrid": Preset(
        "ecdsa",
        asymmetric=AsymmetricScheme(
            "ecdsa-p256",
            "X-Twilio-Email-Event-Webhook-Signature",
            "X-Twilio-Email-Event-Webhook-Timestamp",
            "{timestamp}{body}",
            encoding="base64",
        ),
        defaults={"event_key": "body:/sg_event_id", "event_type": "body:/event"},
        items="",
    ),
    # Mailgun: the signature is in the body, hex HMAC-SHA256 of signature.timestamp + signature.token with the
    # webhook signing key; it does not cover event-data (body_signatures.py). event-data.id names the event.
    "mailgun": Preset(
        "mailgun",
        defaults={"event_key": "body:/event-data/id", "event_type": "body:/event-data/event"},
    ),
    # Mandrill: X-Mandrill-Signature = base64 HMAC-SHA1 of the webhook URL + each POST field's name and value in
    # name order; mandrill_events is a JSON array in one form field. A route names the URL (public_url) and its
    # event_type (const:); the key is the body's digest. Mandrill checks a new URL with HEAD.
    "mandrill": Preset(
        "mandrill",
        defaults={"event_key": "digest:sha256"},
        handshake="mandrill",
    ),
}
