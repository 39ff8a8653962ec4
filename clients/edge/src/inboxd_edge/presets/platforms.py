"""Chat and platform apps: Slack and the others whose apps subscribe to events, each with its URL check."""

from __future__ import annotations

from collections.abc import Mapping

from inboxd_edge.asymmetric import AsymmetricScheme
from inboxd_edge.hmac_template import HmacScheme
from inboxd_edge.presets.base import Preset

PRESETS: Mapping[str, Preset] = {
    # Slack: "v0=" + hex HMAC-SHA256 of "v0:{X-Slack-Request-Timestamp}:{body}", the timestamp held to the
    # route's tolerance (Slack's own advice is 5 minutes). The defaults fit a slash command's form: trigger_id
    # is minted once per invocation and the command names what was asked. An Events API route (JSON) sets
    # event_key = "body:/event_id" and event_type = "body:/event/type" instead.
    "slack": Preset(
        "hmac",
        HmacScheme(
            signature_headers=("X-Slack-Signature",),
            timestamp_header="X-Slack-Request-Timestamp",
            signed_content="v0:{timestamp}:{body}",
            signature_prefix="v0=",
        ),
        defaults={"event_key": "body:trigger_id", "event_type": "body:command"},
        tolerance=300,
        handshake="slack",
    ),
    # Meta (Facebook, Instagram, WhatsApp): X-Hub-Signature-256 = "sha256=" + hex HMAC-SHA256 of the body with the
    # app secret, no timestamp; the subscribe check is a GET with the route's verify token. A delivery batches
    # entries and names no id: the key is the body's digest (a retry resends the bytes), the type its "object".
    "meta": Preset(
        "hmac",
        HmacScheme(signature_headers=("X-Hub-Signature-256",), signed_content="{body}", signature_prefix="sha256="),
        defaults={"event_key": "digest:sha256", "event_type": "body:/object"},
        handshake="meta",
    ),
    # Zoom: x-zm-signature = "v0=" + hex HMAC-SHA256 of "v0:{x-zm-request-timestamp}:{body}" with the secret
    # token; endpoint.url_validation (signed the same way) is answered with the plain token's HMAC. Events carry
    # no id: the key is the body's digest, the type its "event".
    "zoom": Preset(
        "hmac",
        HmacScheme(
            signature_headers=("x-zm-signature",),
            timestamp_header="x-zm-request-timestamp",
            signed_content="v0:{timestamp}:{body}",
            signature_prefix="v0=",
        ),
        defaults={"event_key": "digest:sha256", "event_type": "body:/event"},
        handshake="zoom",
    ),
    # Twitch EventSub: "sha256=" + hex HMAC-SHA256 of message id + timestamp (RFC 3339) + body; Twitch asks to
    # refuse messages older than 10 minutes. The message id is signed and kept across retries: the key. A
    # revocation is keyed and typed like a notification (its body has no "event").
    "twitch": Preset(
        "hmac",
        HmacScheme(
            signature_headers=("Twitch-Eventsub-Message-Signature",),
            id_header="Twitch-Eventsub-Message-Id",
            timestamp_header="Twitch-Eventsub-Message-Timestamp",
            timestamp_unit="rfc3339",
            signed_content="{id}{timestamp}{body}",
            signature_prefix="sha256=",
        ),
        defaults={"event_key": "header:Twitch-Eventsub-Message-Id", "event_type": "body:/subscription/type"},
        tolerance=600,
        handshake="twitch",
    ),
    # Microsoft Graph change notifications: no signature; each item of "value" carries the subscription's
    # clientState. Each item is its own event (no id: the key is the item's canonical digest), typed by its
    # changeType; "?validationToken=" is echoed as text.
    "microsoft-graph": Preset(
        "client-state",
        defaults={"event_key": "digest:sha256", "event_type": "body:/changeType"},
        handshake="microsoft-graph",
        items="/value",
    ),
    # Discord: Ed25519 over X-Signature-Timestamp + body, hex in X-Signature-Ed25519, the application's public
    # key. The defaults fit interactions (the id is the interaction's, the type its number); a webhook events
    # route sets event_key = "digest:sha256" and event_type = "body:/event/type". Discord names no tolerance.
    "discord": Preset(
        "ed25519",
        asymmetric=AsymmetricScheme(
            "ed25519", "X-Signature-Ed25519", "X-Signature-Timestamp", "{timestamp}{body}", encoding="hex"
        ),
        defaults={"event_key": "body:/id", "event_type": "body:/type"},
        handshake="discord",
    ),
}
