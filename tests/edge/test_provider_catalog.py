"""Every preset takes a delivery signed as its provider signs it, and refuses it with one signed byte changed.

The signers are in tests/edge/provider_signers.py: the providers' own
libraries where they exist, their published vectors where they publish one,
their documentation otherwise. Each preset loads from the smallest route a
user would write (its defaults must pass the edge's identity rules), and the
verifier is the one the edge builds from that route.
"""

from __future__ import annotations

import pytest

from inboxd_edge.config import config_from_data
from inboxd_edge.presets import PRESETS
from inboxd_edge.signatures import SignatureError, Verifier
from tests.edge.provider_libraries import LIBRARIES
from tests.edge.provider_signers import ENVIRON, SIGNERS, Delivery


def verifier_for(scheme: str, delivery: Delivery) -> Verifier:
    route = {"name": scheme, "path": "/hooks/x", "scheme": scheme, "namespace": scheme, "allowed_types": ["t"]}
    config = config_from_data({"inboxd": {"target": "127.0.0.1:1"}, "routes": [{**route, **delivery.route}]}, ENVIRON)
    found = config.routes[0].verifier_for({})
    assert found is not None
    return found


def test_there_are_thirty_presets_or_more_and_each_has_a_signer() -> None:
    assert len(PRESETS) >= 30
    assert set(SIGNERS) == set(PRESETS)


@pytest.mark.parametrize("scheme", sorted(SIGNERS))
def test_a_delivery_signed_as_the_provider_signs_is_taken_and_with_one_byte_changed_refused(scheme: str) -> None:
    delivery = SIGNERS[scheme]()
    if scheme in LIBRARIES:
        # The provider's own verifier takes the delivery first: the test signs as the provider does.
        assert LIBRARIES[scheme](delivery), f"{scheme}'s own library refused the test's delivery"
    verifier = verifier_for(scheme, delivery)
    verifier.verify(delivery.body, delivery.headers, delivery.now, delivery.url)
    body, headers = delivery.changed()
    with pytest.raises(SignatureError):
        verifier.verify(body, headers, delivery.now, delivery.url)


@pytest.mark.parametrize("scheme", sorted(SIGNERS))
def test_a_stale_delivery_is_refused_where_the_provider_signs_a_timestamp(scheme: str) -> None:
    delivery = SIGNERS[scheme]()
    verifier = verifier_for(scheme, delivery)
    try:
        verifier.verify(delivery.body, delivery.headers, delivery.now + 3600, delivery.url)
    except SignatureError as exc:
        assert "outside tolerance" in str(exc)
    else:
        # Only schemes without a timestamp take it an hour later: say which, so a new one is a decision.
        assert scheme in UNSTAMPED, f"{scheme} took a delivery an hour old"


UNSTAMPED = {
    "hmac",
    "github",
    "twilio",
    "shopify",
    "meta",
    "microsoft-graph",
    "square",
    "intercom",
    "sentry",
    "vercel",
    "gitlab",
    "typeform",
    "pagerduty",
    "woocommerce",
    "mandrill",
    "lemon-squeezy",
    "cal-com",
    "trello",
}
