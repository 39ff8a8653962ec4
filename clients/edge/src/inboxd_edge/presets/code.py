"""Developer tools: GitHub and the other code, deploy and incident services."""

from __future__ import annotations

from collections.abc import Mapping

from inboxd_edge.hmac_template import HmacScheme
from inboxd_edge.presets.base import Preset

PRESETS: Mapping[str, Preset] = {
    # GitHub: "sha256=" + hex HMAC-SHA256 of the body, no timestamp. X-GitHub-Delivery and X-GitHub-Event
    # are not signed, and the body names no event id: the key is the body's SHA-256 (a redelivery resends
    # the same bytes), the delivery GUID goes to metadata. The type is the route's (const:, one webhook and
    # secret per event type), or X-GitHub-Event for a GitHub App's one webhook (inboxd_edge.identity).
    "github": Preset(
        "hmac",
        HmacScheme(signature_headers=("X-Hub-Signature-256",), signed_content="{body}", signature_prefix="sha256="),
        defaults={"event_key": "digest:sha256", "delivery_id": "header:X-GitHub-Delivery"},
        handshake="github",
    ),
    # GitLab: no signature, the shared secret token comes back in X-Gitlab-Token (compared, never stored). The
    # body names its kind; its UUID headers are not covered by anything: the key is the body's digest.
    "gitlab": Preset(
        "token",
        defaults={
            "event_key": "digest:sha256",
            "event_type": "body:/object_kind",
            "delivery_id": "header:X-Gitlab-Webhook-UUID",
        },
    ),
    # Linear: Linear-Signature = hex HMAC-SHA256 of the body; the body's webhookTimestamp (ms) must be within a
    # minute. Linear-Delivery is unsigned: the key is the body's digest, the type its "type".
    "linear": Preset(
        "hmac",
        HmacScheme(
            signature_headers=("Linear-Signature",),
            signed_content="{body}",
            timestamp_body="/webhookTimestamp",
            timestamp_unit="milliseconds",
        ),
        tolerance=60,
        defaults={"event_key": "digest:sha256", "event_type": "body:/type", "delivery_id": "header:Linear-Delivery"},
    ),
    # Sentry integrations: Sentry-Hook-Signature = hex HMAC-SHA256 of the body with the client secret. Its
    # resource and timestamp headers are not signed: the key is the body's digest, the type its "action".
    "sentry": Preset(
        "hmac",
        HmacScheme(signature_headers=("Sentry-Hook-Signature",), signed_content="{body}"),
        defaults={"event_key": "digest:sha256", "event_type": "body:/action", "delivery_id": "header:Request-ID"},
    ),
    # Vercel: x-vercel-signature = hex HMAC-SHA1 of the body; the body has an id and a type.
    "vercel": Preset(
        "hmac",
        HmacScheme(signature_headers=("x-vercel-signature",), algorithm="sha1", signed_content="{body}"),
        defaults={"event_key": "body:/id", "event_type": "body:/type"},
    ),
    # PagerDuty v3: X-PagerDuty-Signature = "v1=" + hex HMAC-SHA256 of the body, comma-separated while a secret
    # rolls. The event has an id and an event_type.
    "pagerduty": Preset(
        "hmac",
        HmacScheme(signature_headers=("X-PagerDuty-Signature",), signed_content="{body}", signature_prefix="v1="),
        defaults={"event_key": "body:/event/id", "event_type": "body:/event/event_type"},
    ),
}
