"""The HMAC template ([routes.hmac]): algorithms, placeholders, signature lists and pairs, and its settings' errors."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from typing import Any

import pytest
import stripe

from inboxd_edge.config import ConfigError, config_from_data
from inboxd_edge.hmac_template import HmacScheme, HmacVerifier, hmac_scheme
from inboxd_edge.presets import PRESETS
from inboxd_edge.signatures import SignatureError

BODY = b'{"id": "evt_1", "type": "thing.happened"}'
SECRET = "template-secret"


def route_with(hmac_table: dict[str, Any], **route: Any) -> dict[str, Any]:
    return {
        "inboxd": {"target": "127.0.0.1:1"},
        "routes": [
            {
                "name": "t",
                "path": "/hooks/t",
                "scheme": "hmac",
                "secrets": [SECRET],
                "namespace": "t",
                "event_key": "body:/id",
                "event_type": "body:/type",
                "allowed_types": ["thing.happened"],
                "hmac": hmac_table,
                **route,
            }
        ],
    }


def test_an_unknown_key_under_routes_hmac_is_named_with_the_settings_it_takes() -> None:
    with pytest.raises(ConfigError, match=r"route t: \[routes.hmac\] has no setting 'algorthm'; it takes .*algorithm"):
        config_from_data(route_with({"signature_headers": ["X-Sig"], "algorthm": "sha1"}), {})


@pytest.mark.parametrize(
    ("table", "complaint"),
    [
        ({"signature_headers": ["X"], "algorithm": "md5"}, "algorithm must be one of sha1, sha256, sha512, not 'md5'"),
        ({"signature_headers": ["X"], "encoding": "base32"}, "encoding must be one of hex, base64"),
        ({"signature_headers": ["X"], "signed_content": "{id}.{body}"}, "no id_header"),
        ({"signature_headers": ["X"], "signed_content": "{nonce}{body}"}, r"only \{body\}, \{timestamp\}"),
        ({"algorithm": "sha1"}, "needs signature_headers"),
    ],
)
def test_a_template_setting_it_cannot_verify_with_is_refused_naming_it(table: dict[str, Any], complaint: str) -> None:
    with pytest.raises(ConfigError, match=complaint):
        config_from_data(route_with(table), {})


@pytest.mark.parametrize("algorithm", ["sha1", "sha256", "sha512"])
def test_each_algorithm_verifies_and_a_changed_byte_is_refused(algorithm: str) -> None:
    scheme = HmacScheme(signature_headers=("X-Sig",), algorithm=algorithm, signed_content="{body}")  # type: ignore[arg-type]
    verifier = HmacVerifier(scheme, (SECRET.encode(),), 300)
    mac = hmac.new(SECRET.encode(), BODY, algorithm).hexdigest()
    verifier.verify(BODY, {"X-Sig": mac}, time.time())
    with pytest.raises(SignatureError, match="no matching signature"):
        verifier.verify(BODY.replace(b"1", b"2"), {"X-Sig": mac}, time.time())


def test_id_url_method_and_timestamp_are_filled_in_where_the_template_puts_them() -> None:
    scheme = HmacScheme(
        signature_headers=("X-Sig",),
        id_header="X-Id",
        timestamp_header="X-Ts",
        signed_content="{method} {url}|{id}|{timestamp}|{body}",
        encoding="base64",
    )
    verifier = HmacVerifier(scheme, (SECRET.encode(),), 300)
    now = time.time()
    stamp, url = str(int(now)), "https://hooks.example.test/t?x={id}"
    content = f"POST {url}|msg_1|{stamp}|".encode() + BODY
    mac = base64.b64encode(hmac.new(SECRET.encode(), content, hashlib.sha256).digest()).decode()
    headers = {"X-Sig": mac, "X-Id": "msg_1", "X-Ts": stamp}
    verifier.verify(BODY, headers, now, url, "post")
    assert verifier.signed_headers == {"x-id", "x-ts"} and verifier.signs_url
    for changed in ({**headers, "X-Id": "msg_2"}, {**headers, "X-Ts": str(int(now) + 1)}):
        with pytest.raises(SignatureError, match="no matching signature"):
            verifier.verify(BODY, changed, now, url)
    with pytest.raises(SignatureError, match="no matching signature"):
        verifier.verify(BODY, headers, now, url, "PUT")
    with pytest.raises(SignatureError, match="missing id"):
        verifier.verify(BODY, {"X-Sig": mac, "X-Ts": stamp}, now, url)


def test_pairs_with_their_own_names_and_separator_carry_the_timestamp_and_several_signatures() -> None:
    # Paddle's shape: ts=<unix>;h1=<hex>, "{ts}:{body}", more than one h1 while a secret rolls.
    scheme = HmacScheme(
        signature_headers=("Sig",),
        signature_format="pairs",
        pair_separator=";",
        timestamp_key="ts",
        signature_key="h1",
        signed_content="{timestamp}:{body}",
    )
    verifier = HmacVerifier(scheme, (SECRET.encode(),), 5)
    now = time.time()
    stamp = str(int(now))
    mac = hmac.new(SECRET.encode(), f"{stamp}:".encode() + BODY, hashlib.sha256).hexdigest()
    verifier.verify(BODY, {"Sig": f"ts={stamp};h1={'0' * 64};h1={mac}"}, now)
    with pytest.raises(SignatureError, match="outside tolerance"):
        verifier.verify(BODY, {"Sig": f"ts={stamp};h1={mac}"}, now + 6)
    with pytest.raises(SignatureError, match="malformed signature header"):
        verifier.verify(BODY, {"Sig": f"h1={mac}"}, now)
    with pytest.raises(SignatureError, match="malformed signature header"):
        verifier.verify(BODY, {"Sig": f"ts={stamp};ts={stamp};h1={mac}"}, now)


@pytest.mark.parametrize(
    ("unit", "stamp_of"),
    [
        ("milliseconds", lambda now: str(int(now * 1000))),
        ("rfc3339", lambda now: time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + ".123456789Z"),
    ],
)
def test_timestamps_in_milliseconds_or_rfc3339_are_held_to_the_tolerance(unit: str, stamp_of: Any) -> None:
    scheme = hmac_scheme(
        None,
        {
            "signature_headers": ["Sig"],
            "timestamp_header": "Ts",
            "timestamp_unit": unit,
            "signed_content": "{timestamp}{body}",
        },
    )
    verifier = HmacVerifier(scheme, (SECRET.encode(),), 60)
    now = time.time()
    stamp = stamp_of(now)
    mac = hmac.new(SECRET.encode(), stamp.encode() + BODY, hashlib.sha256).hexdigest()
    verifier.verify(BODY, {"Sig": mac, "Ts": stamp}, now)
    with pytest.raises(SignatureError, match="outside tolerance"):
        verifier.verify(BODY, {"Sig": mac, "Ts": stamp}, now + 120)


def test_a_base64_secret_is_decoded_as_svix_style_senders_hand_it_out() -> None:
    key = b"\x00\x01binary-secret"
    scheme = hmac_scheme(None, {"signature_headers": "Sig", "signed_content": "{body}", "secret_encoding": "base64"})
    verifier = HmacVerifier.from_secrets(scheme, ["whsec_" + base64.b64encode(key).decode()], 300)
    verifier.verify(BODY, {"Sig": hmac.new(key, BODY, hashlib.sha256).hexdigest()}, time.time())
    with pytest.raises(ValueError, match="not base64"):
        HmacVerifier.from_secrets(scheme, ["not base64!"], 300)


def test_the_stripe_preset_is_the_template_and_takes_what_stripes_library_signs() -> None:
    scheme = PRESETS["stripe"].hmac
    assert scheme is not None
    verifier = HmacVerifier(scheme, (b"whsec_stripe_template",), 300)
    now = int(time.time())
    header = stripe.WebhookSignature.generate_signature_header(BODY.decode(), "whsec_stripe_template", timestamp=now)
    stripe.WebhookSignature.verify_header(BODY.decode(), header, "whsec_stripe_template", 300)
    verifier.verify(BODY, {"Stripe-Signature": header}, now)
    with pytest.raises(SignatureError, match="no matching signature"):
        verifier.verify(BODY + b" ", {"Stripe-Signature": header}, now)


def test_every_hmac_preset_is_an_instance_of_the_template() -> None:
    for name, preset in PRESETS.items():
        if preset.verifier == "hmac" and name != "hmac":
            assert isinstance(preset.hmac, HmacScheme), name


def test_a_timestamp_in_the_signed_body_is_held_to_the_tolerance_as_linear_asks() -> None:
    scheme = PRESETS["linear"].hmac
    assert scheme is not None
    verifier = HmacVerifier(scheme, (SECRET.encode(),), 60)
    now = time.time()
    for body, error in (
        (b'{"type": "Issue", "webhookTimestamp": %d}' % int(now * 1000), None),
        (b'{"type": "Issue", "webhookTimestamp": %d}' % int((now - 61) * 1000), "outside tolerance"),
        (b'{"type": "Issue"}', "missing timestamp"),
    ):
        headers = {"Linear-Signature": hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()}
        if error is None:
            verifier.verify(body, headers, now)
        else:
            with pytest.raises(SignatureError, match=error):
                verifier.verify(body, headers, now)
