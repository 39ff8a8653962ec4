"""The Twilio, Slack, GitHub and Shopify presets on their own, signed by the providers' own libraries or docs.

No server here: each preset's verifier (built from the test routes, as the
edge builds it), what it stores for verifying again, and how a form body
names its event.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any
from urllib.parse import urlencode

import pytest
from slack_sdk.signature import SignatureVerifier
from twilio.request_validator import RequestValidator  # type: ignore[import-untyped]  # twilio ships no types

from inboxd_edge.bodies import document, is_json
from inboxd_edge.config import ConfigError, Route, config_from_data
from inboxd_edge.evidence import signature_metadata
from inboxd_edge.keys import resolve
from inboxd_edge.signatures import SignatureError, Verifier
from inboxd_edge.sources import MissingValue, Request, Source
from tests.edge.rig import (
    FORM,
    SLACK_SECRET,
    TWILIO_PUBLIC_URL,
    TWILIO_TOKEN,
    routes_config,
    sign_github,
    sign_shopify,
)

SMS = {"MessageSid": "SM1", "AccountSid": "AC1", "From": "+15550001", "To": "+15550002", "Body": "hi & bye=ok"}


def route(name: str) -> Route:
    config = config_from_data(routes_config("127.0.0.1:1"), {})
    return next(r for r in config.routes if r.name == name)


def verifier(name: str) -> Verifier:
    found = route(name).verifier_for({})
    assert found is not None
    return found


def twilio_headers(url: str, params: dict[str, str], token: str = TWILIO_TOKEN) -> dict[str, str]:
    return {"X-Twilio-Signature": RequestValidator(token).compute_signature(url, params), "Content-Type": FORM}


def test_twilio_takes_a_form_signed_by_twilios_request_validator() -> None:
    body = urlencode(SMS).encode()
    verifier("twilio").verify(body, twilio_headers(TWILIO_PUBLIC_URL, SMS), time.time(), TWILIO_PUBLIC_URL)


@pytest.mark.parametrize(
    ("body", "url", "token"),
    [
        (urlencode({**SMS, "Body": "hi & bye=no"}).encode(), TWILIO_PUBLIC_URL, TWILIO_TOKEN),
        (urlencode({**SMS, "Extra": "x"}).encode(), TWILIO_PUBLIC_URL, TWILIO_TOKEN),
        (urlencode(SMS).encode(), "http://127.0.0.1:8080/hooks/twilio", TWILIO_TOKEN),
        (urlencode(SMS).encode(), TWILIO_PUBLIC_URL, "someone-elses-token"),
    ],
    ids=["tampered field", "added field", "the edge's own url", "wrong token"],
)
def test_twilio_refuses_a_tampered_form_another_url_or_another_token(body: bytes, url: str, token: str) -> None:
    headers = twilio_headers(TWILIO_PUBLIC_URL, SMS, token)
    with pytest.raises(SignatureError, match="no matching signature"):
        verifier("twilio").verify(body, headers, time.time(), url)


def test_twilio_takes_a_signature_over_the_url_with_or_without_its_default_port() -> None:
    body = urlencode(SMS).encode()
    with_port = TWILIO_PUBLIC_URL.replace(".test/", ".test:443/")
    verifier("twilio").verify(body, twilio_headers(with_port, SMS), time.time(), TWILIO_PUBLIC_URL)
    verifier("twilio").verify(body, twilio_headers(TWILIO_PUBLIC_URL, SMS), time.time(), with_port)


def test_twilio_signs_a_json_body_through_the_bodysha256_in_its_url() -> None:
    body = b'{"MessageSid": "SM1",  "AccountSid": "AC1"}'
    url = f"{TWILIO_PUBLIC_URL}?bodySHA256={hashlib.sha256(body).hexdigest()}"
    headers = {"X-Twilio-Signature": RequestValidator(TWILIO_TOKEN).compute_signature(url, {})}
    verifier("twilio").verify(body, {**headers, "Content-Type": "application/json"}, time.time(), url)
    assert RequestValidator(TWILIO_TOKEN).validate(url, body.decode(), headers["X-Twilio-Signature"])
    with pytest.raises(SignatureError, match="bodySHA256"):
        verifier("twilio").verify(body + b" ", headers, time.time(), url)
    with pytest.raises(SignatureError, match="neither a form"):
        verifier("twilio").verify(body, headers, time.time(), TWILIO_PUBLIC_URL)


def slack_headers(body: bytes, at: float) -> dict[str, str]:
    stamp = str(int(at))
    signature = SignatureVerifier(SLACK_SECRET).generate_signature(timestamp=stamp, body=body)
    assert signature is not None
    return {"X-Slack-Signature": signature, "X-Slack-Request-Timestamp": stamp}


def test_slack_takes_a_signature_made_by_slack_sdk_and_refuses_tampering_and_stale_timestamps() -> None:
    body = urlencode({"team_id": "T1", "command": "/deploy", "text": "prod", "trigger_id": "13345.abc"}).encode()
    now = time.time()
    verifier("slack").verify(body, slack_headers(body, now), now)
    with pytest.raises(SignatureError, match="no matching signature"):
        verifier("slack").verify(body.replace(b"prod", b"dev"), slack_headers(body, now), now)
    with pytest.raises(SignatureError, match="outside tolerance"):
        verifier("slack").verify(body, slack_headers(body, now - 301), now)
    with pytest.raises(SignatureError, match="missing timestamp"):
        verifier("slack").verify(body, {"X-Slack-Signature": slack_headers(body, now)["X-Slack-Signature"]}, now)


def test_github_and_shopify_take_the_signatures_their_docs_describe_and_refuse_a_tampered_body() -> None:
    body = b'{"action": "opened", "issue": {"id": 1}}'
    now = time.time()
    verifier("github").verify(body, sign_github(body), now)
    verifier("shopify").verify(body, sign_shopify(body), now)
    for name, sign in (("github", sign_github), ("shopify", sign_shopify)):
        with pytest.raises(SignatureError, match="no matching signature"):
            verifier(name).verify(body + b"\n", sign(body), now)
        with pytest.raises(SignatureError, match="missing signature"):
            verifier(name).verify(body, {}, now)


@pytest.mark.parametrize(
    ("name", "headers", "url", "stored"),
    [
        (
            "twilio",
            {"X-Twilio-Signature": "sig=", "I-Twilio-Idempotency-Token": "t"},
            TWILIO_PUBLIC_URL + "?a=1",
            {"x-twilio-signature": "sig=", "url": TWILIO_PUBLIC_URL + "?a=1"},
        ),
        (
            "slack",
            {"X-Slack-Signature": "v0=ab", "X-Slack-Request-Timestamp": "12", "X-Slack-Retry-Num": "1"},
            "",
            {"x-slack-signature": "v0=ab", "x-slack-request-timestamp": "12"},
        ),
        (
            "github",
            {"X-Hub-Signature-256": "sha256=ab", "X-GitHub-Delivery": "d"},
            "",
            {"x-hub-signature-256": "sha256=ab"},
        ),
        ("shopify", {"X-Shopify-Hmac-Sha256": "q==", "X-Shopify-Topic": "t"}, "", {"x-shopify-hmac-sha256": "q=="}),
        ("stripe", {"Stripe-Signature": "t=1,v1=ab"}, "", {"stripe-signature": "t=1,v1=ab"}),
        (
            "mailera-junk",
            {"X-Mailera-Signature": "ab", "X-MailHub-Timestamp": "12", "X-MailHub-Event": "e"},
            "",
            {"x-mailera-signature": "ab", "x-mailhub-timestamp": "12"},
        ),
    ],
)
def test_every_input_the_check_read_is_stored_under_inboxd_signature_and_nothing_else(
    name: str, headers: dict[str, str], url: str, stored: dict[str, str]
) -> None:
    expected = {f"inboxd.signature.{k}": v for k, v in stored.items()}
    assert signature_metadata(verifier(name), headers, url) == expected


def test_a_form_body_names_its_event_from_its_fields_and_is_forwarded_byte_for_byte() -> None:
    body = b"Body=hi+there&MessageSid=SM9&AccountSid=AC%2F7"
    parsed = document(body, FORM + "; charset=utf-8")
    event = resolve(
        route("twilio"),
        Request(parsed, {}, {}, body),
        content_type=FORM + "; charset=utf-8",
        signature={"inboxd.signature.url": TWILIO_PUBLIC_URL},
    )
    assert (event.namespace, event.event_key, event.event_type) == ("twilio/AC%2F7", "SM9", "message.received")
    assert (event.payload, event.content_type) == (body, FORM + "; charset=utf-8")
    assert event.metadata["inboxd.signature.url"] == TWILIO_PUBLIC_URL


def test_a_form_field_sent_twice_names_no_event() -> None:
    body = b"MessageSid=SM1&MessageSid=SM2&AccountSid=AC1"
    with pytest.raises(MissingValue, match="body:MessageSid"):
        resolve(route("twilio"), Request(document(body, FORM), {}, {}, body), content_type=FORM)


@pytest.mark.parametrize(
    ("content_type", "body", "parsed"),
    [
        ("", b'{"a": 1}', {"a": 1}),
        ("application/vnd.api+json", b"[1]", [1]),
        ("Application/JSON; charset=utf-8", b'"x"', "x"),
        (FORM, b"a=1&b=&a=2&c=%C3%A9", {"a": ["1", "2"], "b": "", "c": "é"}),
        ("text/xml", b"<a>1</a>", None),
        ("application/octet-stream", b"\xff\x00", None),
    ],
)
def test_a_body_is_read_as_its_content_type_says(content_type: str, body: bytes, parsed: Any) -> None:
    assert document(body, content_type) == parsed


@pytest.mark.parametrize(
    ("content_type", "body", "reason"),
    [("application/json", b"a=1", "not UTF-8 JSON"), (FORM, b"a=%FF", "not a UTF-8 form"), (FORM, b"\xff", "form")],
)
def test_a_body_that_is_not_what_its_type_says_is_refused_with_the_reason(
    content_type: str, body: bytes, reason: str
) -> None:
    with pytest.raises(ValueError, match=reason):
        document(body, content_type)


def test_a_trimmed_json_payload_carries_no_signature_inputs_that_could_not_verify() -> None:
    body = json.dumps({"inbox": "i", "event": "email.received", "headers": {"message-id": "m"}, "delivered_at": 1})
    signature = {"inboxd.signature.x-hidemy-signature": "ab"}
    trimmed = resolve(route("hidemy"), Request(json.loads(body), {}, {}, body.encode()), signature=signature)
    assert "inboxd.signature.x-hidemy-signature" not in trimmed.metadata
    assert is_json(trimmed.content_type)
    kept = resolve(route("stripe"), Request({"id": "evt", "type": "payment_intent.succeeded", "account": "a"}, {}, {}))
    assert kept.metadata == {"edge.route": "stripe", "edge.scheme": "stripe"}


def test_digest_sha256_names_an_event_by_its_raw_bytes() -> None:
    body = b'{"id": 1,  "a": 2}'
    assert Source.parse("digest:sha256").read(Request(None, {}, {}, body)) == hashlib.sha256(body).hexdigest()
    with pytest.raises(ValueError, match="digest:sha256"):
        Source.parse("digest:md5")


@pytest.mark.parametrize(
    ("changes", "complaint"),
    [
        ({"public_url": None}, "public_url is required for scheme 'twilio'"),
        ({"public_url": "/twilio/sms"}, "absolute http"),
        ({"public_url": TWILIO_PUBLIC_URL + "?a=1"}, "no query"),
        ({"public_url": "https://x.test/{account}"}, "which the path does not define"),
        ({"scheme": "stripe"}, "public_url is only for a scheme that signs the URL"),
        ({"event_type": "header:X-Twilio-Event"}, "event_type comes from header:X-Twilio-Event"),
    ],
)
def test_a_twilio_route_names_the_public_url_it_is_signed_for(changes: dict[str, Any], complaint: str) -> None:
    data = routes_config("127.0.0.1:1")
    twilio = next(r for r in data["routes"] if r["name"] == "twilio")
    data["routes"] = [{k: v for k, v in {**twilio, **changes}.items() if v is not None}]
    with pytest.raises(ConfigError, match=complaint):
        config_from_data(data, {})


def test_github_and_shopify_need_the_route_to_name_the_type_their_unsigned_headers_carry() -> None:
    for scheme in ("github", "shopify"):
        data = routes_config("127.0.0.1:1")
        chosen = next(r for r in data["routes"] if r["name"] == scheme)
        data["routes"] = [{k: v for k, v in chosen.items() if k != "event_type"}]
        with pytest.raises(ConfigError, match=f"event_type is required for scheme '{scheme}'"):
            config_from_data(data, {})
    # Shopify's topic header stays refused; GitHub's event header only where a re-post cannot mint a new event.
    data = routes_config("127.0.0.1:1")
    shopify = next(r for r in data["routes"] if r["name"] == "shopify")
    data["routes"] = [{**shopify, "event_type": "header:X-Shopify-Topic"}]
    with pytest.raises(ConfigError, match="which the signature does not cover"):
        config_from_data(data, {})


@pytest.mark.parametrize(
    ("changes", "loads"),
    [
        ({}, True),
        ({"event_key": "body:/hook_id"}, False),
        ({"key_includes_type": True}, False),
        ({"event_type": "header:X-GitHub-Delivery"}, False),
        ({"scheme": "meta"}, False),
    ],
    ids=["digest key", "body key", "type in key", "another header", "another scheme"],
)
def test_a_github_app_route_takes_its_type_from_x_github_event_only_with_the_bodys_digest_as_key(
    changes: dict[str, Any], loads: bool
) -> None:
    data = routes_config("127.0.0.1:1")
    github = next(r for r in data["routes"] if r["name"] == "github")
    route = {**github, "event_type": "header:X-GitHub-Event", "allowed_types": ["push", "issues"], **changes}
    data["routes"] = [route]
    if loads:
        config_from_data(data, {})
    else:
        with pytest.raises(ConfigError, match="which the signature does not cover"):
            config_from_data(data, {})
