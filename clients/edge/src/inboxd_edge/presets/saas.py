"""Business apps: CRM, support, scheduling and forms."""

from __future__ import annotations

from collections.abc import Mapping

from inboxd_edge.hmac_template import HmacScheme
from inboxd_edge.presets.base import Preset

PRESETS: Mapping[str, Preset] = {
    # HubSpot v3: X-HubSpot-Signature-v3 = base64 HMAC-SHA256 of method + URI + body + X-HubSpot-Request-Timestamp
    # (milliseconds), refused past 5 minutes. The route names the URI HubSpot calls (public_url). A body is an
    # array of events: each is its own, keyed by eventId.
    "hubspot": Preset(
        "hmac",
        HmacScheme(
            signature_headers=("X-HubSpot-Signature-v3",),
            timestamp_header="X-HubSpot-Request-Timestamp",
            timestamp_unit="milliseconds",
            signed_content="{method}{url}{body}{timestamp}",
            encoding="base64",
        ),
        defaults={"event_key": "body:/eventId", "event_type": "body:/subscriptionType"},
        tolerance=300,
        items="",
    ),
    # Intercom: X-Hub-Signature = "sha1=" + hex HMAC-SHA1 of the body with the app's client secret; the signed
    # "ping" topic it sends when a webhook is registered is answered, never stored.
    "intercom": Preset(
        "hmac",
        HmacScheme(
            signature_headers=("X-Hub-Signature",), algorithm="sha1", signed_content="{body}", signature_prefix="sha1="
        ),
        defaults={"event_key": "body:/id", "event_type": "body:/topic"},
        handshake="intercom",
    ),
    # Calendly: Calendly-Webhook-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "{t}.{body}">, 3 minutes. The body names
    # no event id: the key is its digest.
    "calendly": Preset(
        "hmac",
        HmacScheme(
            signature_headers=("Calendly-Webhook-Signature",),
            signature_format="pairs",
            signed_content="{timestamp}.{body}",
        ),
        defaults={"event_key": "digest:sha256", "event_type": "body:/event"},
        tolerance=180,
    ),
    # Typeform: Typeform-Signature = "sha256=" + base64 HMAC-SHA256 of the body.
    "typeform": Preset(
        "hmac",
        HmacScheme(
            signature_headers=("Typeform-Signature",),
            signed_content="{body}",
            encoding="base64",
            signature_prefix="sha256=",
        ),
        defaults={"event_key": "body:/event_id", "event_type": "body:/event_type"},
    ),
    # Cal.com: X-Cal-Signature-256 = hex HMAC-SHA256 of the body; triggerEvent names the type, no id.
    "cal-com": Preset(
        "hmac",
        HmacScheme(signature_headers=("X-Cal-Signature-256",), signed_content="{body}"),
        defaults={"event_key": "digest:sha256", "event_type": "body:/triggerEvent"},
    ),
    # Mux: Mux-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "{t}.{body}">; id and type in the body.
    "mux": Preset(
        "hmac",
        HmacScheme(signature_headers=("Mux-Signature",), signature_format="pairs", signed_content="{timestamp}.{body}"),
        defaults={"event_key": "body:/id", "event_type": "body:/type"},
        tolerance=300,
    ),
    # Trello: X-Trello-Webhook = base64 HMAC-SHA1 of the body + the callback URL (public_url) with the app secret.
    "trello": Preset(
        "hmac",
        HmacScheme(
            signature_headers=("X-Trello-Webhook",), algorithm="sha1", signed_content="{body}{url}", encoding="base64"
        ),
        defaults={"event_key": "body:/action/id", "event_type": "body:/action/type"},
        handshake="trello",
    ),
}
