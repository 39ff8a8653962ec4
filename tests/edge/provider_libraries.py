"""The providers' own verifiers, run on the deliveries tests/edge/provider_signers.py makes.

Where a provider publishes a library that verifies its webhooks, the signer's
delivery must pass it too: that shows the test signs as the provider does,
so the edge is checked against the provider's scheme and not against a copy
of the edge's own reading of it.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from urllib.parse import parse_qsl

import stripe
from discord_interactions import verify_key as discord_verify  # type: ignore[import-untyped]  # ships no types
from hubspot.utils.signature import Signature as HubSpotSignature  # type: ignore[import-untyped]  # ships no types
from paddle_billing.Notifications import Secret, Verifier  # type: ignore[import-untyped]  # ships no types
from sendgrid.helpers.eventwebhook import EventWebhook  # type: ignore[import-untyped]  # ships no types
from slack_sdk.signature import SignatureVerifier
from square.utils.webhooks_helper import verify_signature as square_verify
from standardwebhooks.webhooks import Webhook as StandardWebhook
from svix.webhooks import Webhook as SvixWebhook
from telnyx.lib.webhook_verification import verify_webhook_signature as telnyx_verify
from twilio.request_validator import RequestValidator  # type: ignore[import-untyped]  # twilio ships no types

from tests.edge.provider_signers import SECRET, SENDGRID_KEY, URL, WHSEC, Delivery


def _standard(d: Delivery) -> bool:
    StandardWebhook(WHSEC).verify(d.body, d.headers)
    return True


def _svix(d: Delivery) -> bool:
    SvixWebhook(WHSEC).verify(d.body, d.headers)
    return True


def _stripe(d: Delivery) -> bool:
    return bool(stripe.WebhookSignature.verify_header(d.body.decode(), d.headers["Stripe-Signature"], SECRET, 300))


def _slack(d: Delivery) -> bool:
    return SignatureVerifier(SECRET).is_valid(
        d.body, d.headers["X-Slack-Request-Timestamp"], d.headers["X-Slack-Signature"]
    )


def _twilio(d: Delivery) -> bool:
    return bool(
        RequestValidator(SECRET).validate(URL, dict(parse_qsl(d.body.decode())), d.headers["X-Twilio-Signature"])
    )


def _discord(d: Delivery) -> bool:
    headers = d.headers
    return bool(
        discord_verify(d.body, headers["X-Signature-Ed25519"], headers["X-Signature-Timestamp"], d.route["public_key"])
    )


def _telnyx(d: Delivery) -> bool:
    telnyx_verify(d.body, d.headers, str(d.route["public_key"]))
    return True


def _sendgrid(d: Delivery) -> bool:
    return bool(
        EventWebhook(SENDGRID_KEY).verify_signature(
            d.body.decode(),
            d.headers["X-Twilio-Email-Event-Webhook-Signature"],
            d.headers["X-Twilio-Email-Event-Webhook-Timestamp"],
        )
    )


def _square(d: Delivery) -> bool:
    return square_verify(
        request_body=d.body.decode(),
        signature_header=d.headers["x-square-hmacsha256-signature"],
        signature_key=SECRET,
        notification_url=URL,
    )


def _paddle(d: Delivery) -> bool:
    request = SimpleNamespace(headers=d.headers, body=d.body)
    return bool(Verifier().verify(request, Secret(SECRET)))


def _hubspot(d: Delivery) -> bool:
    return bool(
        HubSpotSignature.is_valid(
            signature=d.headers["X-HubSpot-Signature-v3"],
            client_secret=SECRET,
            request_body=d.body.decode(),
            http_uri=URL,
            signature_version="v3",
            timestamp=d.headers["X-HubSpot-Request-Timestamp"],
        )
    )


LIBRARIES: dict[str, Callable[[Delivery], bool]] = {
    "standard-webhooks": _standard,
    "svix": _svix,
    "clerk": _svix,
    "resend": _svix,
    "stripe": _stripe,
    "slack": _slack,
    "twilio": _twilio,
    "discord": _discord,
    "telnyx": _telnyx,
    "sendgrid": _sendgrid,
    "square": _square,
    "paddle": _paddle,
    "hubspot": _hubspot,
}
