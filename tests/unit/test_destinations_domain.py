"""Destinations' rules without I/O: the signature libraries accept, what each answer does, Retry-After, the spec."""

from __future__ import annotations

import base64
import ipaddress
import json
from datetime import UTC, datetime, timedelta

import pytest
import standardwebhooks
import svix.webhooks

from inboxd.domain.destination_addresses import AllowList
from inboxd.domain.destinations import (
    DestinationSpec,
    Verdict,
    checked_spec,
    delivery_headers,
    endpoint_failed,
    new_secret,
    retry_after,
    verdict,
    webhook_id,
)
from inboxd.domain.errors import InvalidArgument

NOW = datetime(2026, 12, 7, 18, 0, tzinfo=UTC)


def _spec(**fields: object) -> DestinationSpec:
    base: dict[str, object] = {"name": "billing", "url": "https://hooks.example.com/in", "namespace_pattern": "s/*"}
    return checked_spec(DestinationSpec(**{"secret": "", **base, **fields}), allow_http=False)  # type: ignore[arg-type]


def test_the_signature_is_what_standardwebhooks_and_svix_verify_and_signing_agrees() -> None:
    spec = _spec()
    body = b'{"b": 2,  "a": 1}'
    headers = delivery_headers(
        spec, namespace="s/1", event_key="evt", event_type="t", attempt=3, content_type="application/json",
        body=body, metadata={}, now=datetime.now(UTC),
    )  # fmt: skip
    standardwebhooks.Webhook(spec.secret).verify(body, headers)
    svix.webhooks.Webhook(spec.secret).verify(body, headers)
    ours = headers["webhook-signature"]
    theirs = standardwebhooks.Webhook(spec.secret).sign(
        headers["webhook-id"], datetime.fromtimestamp(int(headers["webhook-timestamp"]), UTC), body.decode()
    )
    assert ours == theirs
    with pytest.raises(standardwebhooks.webhooks.WebhookVerificationError):
        standardwebhooks.Webhook(spec.secret).verify(body + b" ", headers)


def test_the_webhook_id_is_stable_per_event_and_differs_between_events() -> None:
    assert webhook_id("s/1", "evt") == webhook_id("s/1", "evt")
    assert webhook_id("s/1", "evt") != webhook_id("s/1", "evt2") != webhook_id("s/2", "evt")
    # A NUL separates the two, so ("a", "bc") and ("ab", "c") differ.
    assert webhook_id("a", "bc") != webhook_id("ab", "c")


def test_signature_metadata_goes_along_only_when_asked() -> None:
    metadata = {"inboxd.signature.stripe-signature": "t=1,v1=abc", "delivery": "d-1"}

    def headers(forward: bool) -> dict[str, str]:
        return delivery_headers(
            _spec(forward_signature_metadata=forward), namespace="s", event_key="k", event_type="t", attempt=1,
            content_type="text/plain", body=b"x", metadata=metadata, now=NOW,
        )  # fmt: skip

    assert headers(True)["inboxd-signature-stripe-signature"] == "t=1,v1=abc"
    assert not any(k.startswith("inboxd-signature-") for k in headers(False))
    assert "delivery" not in json.dumps(headers(True))
    assert headers(True)["content-type"] == "text/plain"


@pytest.mark.parametrize(
    ("status", "wanted"),
    [
        (200, Verdict.COMPLETE), (204, Verdict.COMPLETE), (None, Verdict.RETRY), (500, Verdict.RETRY),
        (503, Verdict.RETRY), (408, Verdict.RETRY), (409, Verdict.RETRY), (429, Verdict.RETRY),
        (302, Verdict.RETRY), (400, Verdict.DEAD_LETTER), (401, Verdict.DEAD_LETTER), (410, Verdict.DEAD_LETTER),
        (422, Verdict.DEAD_LETTER),
    ],
)  # fmt: skip
def test_each_answer_does_what_the_table_says(status: int | None, wanted: Verdict) -> None:
    assert verdict(status) is wanted
    # Only the endpoint's failures count toward the breaker: a 4xx judges one event.
    assert endpoint_failed(status) is (wanted is Verdict.RETRY)


def test_retry_after_reads_seconds_and_dates_and_is_capped() -> None:
    assert retry_after("120", NOW) == timedelta(seconds=120)
    assert retry_after("Mon, 07 Dec 2026 18:05:00 GMT", NOW) == timedelta(minutes=5)
    assert retry_after("Mon, 07 Dec 2026 17:00:00 GMT", NOW) == timedelta(0)
    assert retry_after("999999", NOW) == timedelta(hours=1)
    assert retry_after("soon", NOW) is None
    assert retry_after(None, NOW) is None


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"url": "http://hooks.example.com/in"}, "scheme 'http' is not allowed"),
        ({"url": "https://user:pw@hooks.example.com/in"}, "must not carry credentials"),
        ({"url": "https:///in"}, "names no host"),
        ({"name": "has space"}, "letters, digits"),
        ({"secret": "not-a-secret"}, "must begin with 'whsec_'"),
        ({"secret": "whsec_" + base64.b64encode(b"short").decode()}, "must hold 24..64 bytes, holds 5"),
        ({"timeout": timedelta(minutes=10)}, "between 1 s and 300 s, got 600 s"),
        ({"concurrency": 0}, "must be 1..100, got 0"),
    ],
)
def test_a_bad_spec_is_refused_naming_the_field(fields: dict[str, object], problem: str) -> None:
    with pytest.raises(InvalidArgument, match=problem):
        _spec(**fields)


def test_a_secret_is_generated_when_absent_and_kept_when_given() -> None:
    assert _spec().secret.startswith("whsec_")
    given = new_secret()
    assert _spec(secret=given).secret == given


def test_the_allow_list_reads_cidrs_addresses_and_names() -> None:
    allow = AllowList.parse(["10.1.0.0/16", "::1", "Hooks.Internal."])
    assert allow.allows("x", ipaddress.ip_address("10.1.2.3"))
    assert not allow.allows("x", ipaddress.ip_address("10.2.0.1"))
    assert allow.allows("x", ipaddress.ip_address("::1"))
    assert allow.allows("hooks.internal", ipaddress.ip_address("192.168.0.9"))
