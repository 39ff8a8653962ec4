"""The verifiers on their own: real signatures pass; tampered, stale, unsigned and wrong-secret ones do not."""

from __future__ import annotations

import base64
import time

import pytest

from inboxd_edge.hmac_template import HmacScheme, HmacVerifier
from inboxd_edge.presets import PRESETS
from inboxd_edge.signatures import SignatureError, StandardWebhooksVerifier
from tests.edge.rig import (
    MAILERA_SECRET,
    STD_SECRET,
    STRIPE_NEW_SECRET,
    STRIPE_OLD_SECRET,
    sign_hmac,
    sign_standard,
    sign_stripe,
)

BODY = b'{"type": "invoice.paid", "data": {"id": "in_1"}}'
TOLERANCE = 300.0


def standard() -> StandardWebhooksVerifier:
    return StandardWebhooksVerifier.from_secrets([STD_SECRET], TOLERANCE)


def stripe() -> HmacVerifier:
    scheme = PRESETS["stripe"].hmac
    assert scheme is not None
    return HmacVerifier(scheme, (STRIPE_NEW_SECRET.encode(), STRIPE_OLD_SECRET.encode()), TOLERANCE)


def mailera() -> HmacVerifier:
    scheme = PRESETS["mailera"].hmac
    assert scheme is not None
    return HmacVerifier(scheme, (MAILERA_SECRET.encode(),), TOLERANCE)


def test_standard_webhooks_accepts_a_signature_made_by_the_library() -> None:
    standard().verify(BODY, sign_standard(BODY, "msg_1"), time.time())


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda h: {**h, "webhook-id": "msg_other"}, "no matching signature"),
        (lambda h: {k: v for k, v in h.items() if k != "webhook-signature"}, "missing signature"),
        (lambda h: {**h, "webhook-signature": "v1,not base64!"}, "no matching signature"),
        (lambda h: {**h, "webhook-signature": "garbage"}, "no matching signature"),
    ],
)
def test_standard_webhooks_rejects_altered_or_missing_headers(change: object, reason: str) -> None:
    headers = sign_standard(BODY, "msg_1")
    with pytest.raises(SignatureError, match=reason):
        standard().verify(BODY, change(headers), time.time())  # type: ignore[operator]


def test_standard_webhooks_rejects_a_tampered_body() -> None:
    headers = sign_standard(BODY, "msg_1")
    with pytest.raises(SignatureError, match="no matching signature"):
        standard().verify(BODY.replace(b"in_1", b"in_2"), headers, time.time())


def test_standard_webhooks_rejects_a_stale_timestamp_within_the_libraries_own_window() -> None:
    # 60 s old: the library alone (5 min) would take it; the route's 30 s tolerance must not.
    now = time.time()
    headers = sign_standard(BODY, "msg_1", at=now - 60)
    with pytest.raises(SignatureError, match="outside tolerance"):
        StandardWebhooksVerifier.from_secrets([STD_SECRET], 30.0).verify(BODY, headers, now)


def test_standard_webhooks_rejects_a_body_that_is_not_utf8_instead_of_crashing() -> None:
    body = b"\xff\xfe"
    headers = sign_standard(b"x", "msg_1")
    with pytest.raises(SignatureError):
        standard().verify(body, headers, time.time())


def test_standard_webhooks_takes_either_secret_while_rotating() -> None:
    old = "whsec_" + base64.b64encode(b"the-previous-secret").decode()
    verifier = StandardWebhooksVerifier.from_secrets([STD_SECRET, old], TOLERANCE)
    verifier.verify(BODY, sign_standard(BODY, "msg_1", secret=old), time.time())


def test_stripe_accepts_both_secrets_of_a_rotation() -> None:
    now = time.time()
    stripe().verify(BODY, sign_stripe(BODY, STRIPE_OLD_SECRET), now)
    stripe().verify(BODY, sign_stripe(BODY, STRIPE_NEW_SECRET), now)


def test_stripe_accepts_a_header_listing_several_v1_signatures() -> None:
    good = sign_stripe(BODY, STRIPE_NEW_SECRET)["Stripe-Signature"]
    stamp, mac = good.split(",")
    stripe().verify(BODY, {"stripe-signature": f"{stamp},v1={'0' * 64},{mac},v0=abc"}, time.time())


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({}, "missing signature"),
        ({"Stripe-Signature": "v1=abc"}, "malformed"),
        ({"Stripe-Signature": "t=notanumber,v1=abc"}, "malformed timestamp"),
    ],
)
def test_stripe_rejects_unsigned_and_malformed_headers(headers: dict[str, str], reason: str) -> None:
    with pytest.raises(SignatureError, match=reason):
        stripe().verify(BODY, headers, time.time())


def test_stripe_rejects_a_wrong_secret_a_tampered_body_and_a_replay() -> None:
    now = time.time()
    with pytest.raises(SignatureError, match="no matching"):
        stripe().verify(BODY, sign_stripe(BODY, "whsec_someone_else"), now)
    with pytest.raises(SignatureError, match="no matching"):
        stripe().verify(BODY + b" ", sign_stripe(BODY, STRIPE_NEW_SECRET), now)
    with pytest.raises(SignatureError, match="outside tolerance"):
        stripe().verify(BODY, sign_stripe(BODY, STRIPE_NEW_SECRET, at=now - 301), now)
    with pytest.raises(SignatureError, match="outside tolerance"):
        stripe().verify(BODY, sign_stripe(BODY, STRIPE_NEW_SECRET, at=now + 301), now)


def test_mailera_preset_takes_either_signature_header_with_or_without_prefix() -> None:
    stamp, mac = sign_hmac(BODY, MAILERA_SECRET)
    now = time.time()
    mailera().verify(BODY, {"X-MailHub-Signature": mac, "X-MailHub-Timestamp": stamp}, now)
    mailera().verify(BODY, {"x-mailera-signature": "sha256=" + mac, "x-mailhub-timestamp": stamp}, now)


def test_mailera_preset_rejects_a_signature_without_its_timestamp_or_for_another_timestamp() -> None:
    stamp, mac = sign_hmac(BODY, MAILERA_SECRET)
    now = time.time()
    with pytest.raises(SignatureError, match="missing timestamp"):
        mailera().verify(BODY, {"X-MailHub-Signature": mac}, now)
    with pytest.raises(SignatureError, match="no matching"):
        mailera().verify(BODY, {"X-MailHub-Signature": mac, "X-MailHub-Timestamp": str(int(stamp) + 1)}, now)


def test_hmac_scheme_checks_base64_signatures_over_a_custom_template() -> None:
    import hashlib
    import hmac

    scheme = HmacScheme(
        signature_headers=("X-Sig",), timestamp_header="X-Ts", signed_content="v0:{timestamp}:{body}", encoding="base64"
    )
    verifier = HmacVerifier(scheme, (b"old", b"new"), TOLERANCE)
    stamp = str(int(time.time()))
    mac = base64.b64encode(hmac.new(b"old", f"v0:{stamp}:".encode() + BODY, hashlib.sha256).digest()).decode()
    verifier.verify(BODY, {"X-Sig": mac, "X-Ts": stamp}, time.time())
    with pytest.raises(SignatureError):
        verifier.verify(BODY, {"X-Sig": mac.swapcase(), "X-Ts": stamp}, time.time())


@pytest.mark.parametrize(
    "kwargs",
    [
        {"signature_headers": ()},
        {"signature_headers": ("X",), "signed_content": "{timestamp}"},
        {"signature_headers": ("X",), "signed_content": "{body}{body}"},
        {"signature_headers": ("X",), "signed_content": "{id}.{body}"},
        {"signature_headers": ("X",), "signed_content": "{timestamp}.{body}"},
    ],
)
def test_hmac_scheme_refuses_configurations_it_cannot_verify(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        HmacScheme(**kwargs)  # type: ignore[arg-type]
