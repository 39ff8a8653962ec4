"""Payments and shops: Stripe, Shopify and the others that sell."""

from __future__ import annotations

from collections.abc import Mapping

from inboxd_edge.hmac_template import HmacScheme
from inboxd_edge.presets.base import Preset

PRESETS: Mapping[str, Preset] = {
    # Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "{t}.{body}">, several v1 while a secret rolls; 5 minutes
    # is its libraries' default tolerance. The evt_ id names one event of one type and is kept across retries.
    "stripe": Preset(
        "hmac",
        HmacScheme(
            signature_headers=("Stripe-Signature",),
            signature_format="pairs",
            timestamp_key="t",
            signature_key="v1",
            signed_content="{timestamp}.{body}",
        ),
        defaults={"event_key": "body:/id", "event_type": "body:/type"},
        tolerance=300,
    ),
    # Shopify: base64 HMAC-SHA256 of the body, no timestamp. X-Shopify-Topic and X-Shopify-Webhook-Id are
    # not signed: the key is the body's SHA-256 (a retry resends the same bytes), the webhook id goes to
    # metadata, and a route sets event_type (const:).
    "shopify": Preset(
        "hmac",
        HmacScheme(signature_headers=("X-Shopify-Hmac-Sha256",), signed_content="{body}", encoding="base64"),
        defaults={"event_key": "digest:sha256", "delivery_id": "header:X-Shopify-Webhook-Id"},
    ),
    # Paddle Billing: Paddle-Signature: ts=<unix>;h1=<hex HMAC-SHA256 of "{ts}:{body}">, several h1 while a secret
    # rolls; its SDKs allow 5 seconds. event_id names one event across retries.
    "paddle": Preset(
        "hmac",
        HmacScheme(
            signature_headers=("Paddle-Signature",),
            signature_format="pairs",
            pair_separator=";",
            timestamp_key="ts",
            signature_key="h1",
            signed_content="{timestamp}:{body}",
        ),
        defaults={"event_key": "body:/event_id", "event_type": "body:/event_type"},
        tolerance=5,
    ),
    # Square: x-square-hmacsha256-signature = base64 HMAC-SHA256 of the notification URL + body with the
    # subscription's signature key (the route names that URL: public_url). No timestamp; event_id is kept.
    "square": Preset(
        "hmac",
        HmacScheme(
            signature_headers=("x-square-hmacsha256-signature",), signed_content="{url}{body}", encoding="base64"
        ),
        defaults={"event_key": "body:/event_id", "event_type": "body:/type"},
    ),
    # WooCommerce: X-WC-Webhook-Signature = base64 HMAC-SHA256 of the body. Its topic and delivery headers are
    # not signed: the key is the body's digest, the delivery id goes to metadata, a route sets event_type.
    "woocommerce": Preset(
        "hmac",
        HmacScheme(signature_headers=("X-WC-Webhook-Signature",), signed_content="{body}", encoding="base64"),
        defaults={"event_key": "digest:sha256", "delivery_id": "header:X-WC-Webhook-Delivery-ID"},
    ),
    # Lemon Squeezy: X-Signature = hex HMAC-SHA256 of the body; the event's name is in meta.event_name, no id.
    "lemon-squeezy": Preset(
        "hmac",
        HmacScheme(signature_headers=("X-Signature",), signed_content="{body}"),
        defaults={"event_key": "digest:sha256", "event_type": "body:/meta/event_name"},
    ),
}
