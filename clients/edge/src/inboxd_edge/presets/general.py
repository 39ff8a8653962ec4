"""Schemes that are not one provider's: Standard Webhooks (and Svix), the bare HMAC template, and earlier examples."""

from __future__ import annotations

from collections.abc import Mapping

from inboxd_edge.hmac_template import HmacScheme
from inboxd_edge.presets.base import Preset

PRESETS: Mapping[str, Preset] = {
    # webhook-id (svix-id from Svix) is "the same when the same webhook is resent" (Standard Webhooks spec): the
    # logical event id. The spec's tolerance is the receiver's; 5 minutes is what its libraries use.
    "standard-webhooks": Preset(
        "standard-webhooks",
        defaults={"event_key": "header:webhook-id", "event_type": "body:/type"},
    ),
    # A bare HMAC scheme: every setting comes from the route's [routes.hmac].
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
            signature_prefix="sha256=",
        ),
    ),
    # Senders built on Svix send svix-id/-timestamp/-signature: the same scheme, read under either name.
    "svix": Preset("standard-webhooks", defaults={"event_key": "header:webhook-id", "event_type": "body:/type"}),
    "clerk": Preset("standard-webhooks", defaults={"event_key": "header:webhook-id", "event_type": "body:/type"}),
    "resend": Preset("standard-webhooks", defaults={"event_key": "header:webhook-id", "event_type": "body:/type"}),
}
