"""Routes as configuration: loading and refusing, and the adapter that names each event (no server needed)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from inboxd_edge.config import ConfigError, Route, config_from_data, load_config
from inboxd_edge.keys import UnsupportedType, resolve
from inboxd_edge.sources import MissingValue, Request, Source
from tests.edge.rig import STD_SECRET, routes_config


def route(name: str) -> Route:
    config = config_from_data(routes_config("127.0.0.1:1"), {})
    return next(r for r in config.routes if r.name == name)


def with_route(**changes: Any) -> dict[str, Any]:
    """One plain standard-webhooks route (a single secret, a fixed namespace), changed by `changes`."""
    data = routes_config("127.0.0.1:1")
    plain = {k: v for k, v in data["routes"][0].items() if k != "path_secrets"}
    data["routes"] = [{**plain, "path": "/hooks/plain", "namespace": "std", "secrets": [STD_SECRET], **changes}]
    return data


def test_source_reads_json_pointers_dotted_paths_headers_and_path_params() -> None:
    request = Request(
        {"data": {"object": {"id": "evt_1"}}, "a/b": {"~k": 7}, "list": ["x", "y"], "flag": True},
        {"X-Event": "message.received"},
        {"account": "acme"},
    )
    assert Source.parse("body:/data/object/id").read(request) == "evt_1"
    assert Source.parse("body:data.object.id").read(request) == "evt_1"
    assert Source.parse("body:/a~1b/~0k").read(request) == "7"
    assert Source.parse("body:/list/1").read(request) == "y"
    assert Source.parse("header:X-Event").read(request) == "message.received"
    assert Source.parse("path:account").read(request) == "acme"
    for missing in ("body:/data/nothing", "body:/flag", "body:/data", "body:/list/9", "header:X-None"):
        with pytest.raises(MissingValue):
            Source.parse(missing).read(request)


@pytest.mark.parametrize("text", ["id", "body:", "query:id"])
def test_source_refuses_unknown_forms(text: str) -> None:
    with pytest.raises(ValueError):
        Source.parse(text)


def test_mailera_key_carries_the_routes_type_and_the_delivery_goes_to_metadata_only() -> None:
    mailera = route("mailera-junk")
    document = {"subscription_id": "sub_1", "message": {"message_id": "<m1@example.com>"}}
    # The unsigned event header is never read: the route fixes the type.
    headers = {"X-MailHub-Event": "message.received", "X-MailHub-Delivery": "dlv_42"}
    event = resolve(mailera, Request(document, headers, {}))
    assert event.namespace == "mailera/sub_1"
    assert event.event_key == "message.junk:<m1@example.com>"
    assert "dlv_42" not in event.event_key
    assert event.metadata["delivery_id"] == "dlv_42"
    assert event.message_id == "<m1@example.com>"


def test_a_slash_in_a_namespace_value_cannot_forge_another_namespace() -> None:
    mailera = route("mailera-received")
    document = {"subscription_id": "b/c", "message": {"message_id": "m"}}
    event = resolve(mailera, Request(document, {}, {}))
    assert event.namespace == "mailera/b%2Fc"


def test_a_type_the_route_does_not_take_is_unsupported() -> None:
    with pytest.raises(UnsupportedType):
        resolve(route("std"), Request({"type": "invoice.created"}, {"webhook-id": "m"}, {"account": "a"}))


def test_payload_drop_removes_delivery_only_members_before_accept() -> None:
    document = {"inbox": "i", "event": "email.received", "headers": {"message-id": "m"}, "delivered_at": 1}
    event = resolve(route("hidemy"), Request(document, {}, {}, json.dumps(document).encode()))
    assert json.loads(event.payload) == {"inbox": "i", "event": "email.received", "headers": {"message-id": "m"}}
    assert event.event_key == "m"


@pytest.mark.parametrize(
    ("changes", "complaint"),
    [
        ({"allowed_type": ["x"]}, "unknown keys"),
        ({"allowed_types": []}, "allowed_types"),
        ({"scheme": "carrier-pigeon"}, "scheme"),
        ({"secrets": []}, "secret"),
        ({"namespace": "std/{tenant}"}, "tenant"),
        ({"keep_headers": ["webhook-signature"]}, "keep_headers"),
        ({"scheme": "hmac"}, "hmac"),
        ({"secrets": ["not base64 at all!"]}, "whsec_"),
    ],
)
def test_a_route_that_cannot_work_is_refused_at_load_time(changes: dict[str, Any], complaint: str) -> None:
    with pytest.raises(ConfigError, match=complaint):
        config_from_data(with_route(**changes), {})


def test_secrets_come_from_the_environment_when_the_file_names_them(tmp_path: Path) -> None:
    data = with_route(secrets_env=["STD_SECRET"])
    del data["routes"][0]["secrets"]
    path = tmp_path / "edge.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="STD_SECRET"):
        load_config(path, {})
    assert load_config(path, {"STD_SECRET": STD_SECRET}).routes[0].name == "std"


EXAMPLE = Path(__file__).resolve().parents[2] / "clients" / "edge" / "examples" / "routes.toml"


def _example_environ() -> dict[str, str]:
    """A secret of its own for every variable the example names (routes that share one are refused)."""
    names = [
        "STRIPE_WEBHOOK_SECRET",
        "STRIPE_WEBHOOK_SECRET_PREVIOUS",
        "STRIPE_CONNECT_WEBHOOK_SECRET",
        "MAILERA_RECEIVED_WEBHOOK_SECRET",
        "MAILERA_JUNK_WEBHOOK_SECRET",
        "HIDEMY_WEBHOOK_SECRET",
        "TWILIO_AUTH_TOKEN",
        "TWILIO_STATUS_AUTH_TOKEN",
        "SLACK_SIGNING_SECRET",
        "GITHUB_PUSH_WEBHOOK_SECRET",
        "SHOPIFY_API_SECRET",
        "ACME_WEBHOOK_SECRET",
        "GITHUB_APP_WEBHOOK_SECRET",
        "META_APP_SECRET",
        "META_VERIFY_TOKEN",
    ]
    environ = {name: "whsec_" + base64.b64encode(name.encode()).decode() for name in names}
    environ |= {f"BILLING_ACCT_{i}_SECRET": "whsec_" + base64.b64encode(f"acct {i}".encode()).decode() for i in (1, 2)}
    # A public key, as Discord's portal shows it (hex).
    environ["DISCORD_PUBLIC_KEY"] = "e2" * 32
    return environ


def _example_route(name: str) -> Route:
    return next(r for r in load_config(EXAMPLE, _example_environ()).routes if r.name == name)


def test_the_examples_stripe_route_takes_an_ordinary_event_and_the_connect_route_names_the_account() -> None:
    # An ordinary endpoint's event has no "account" member: the route must not need one.
    ordinary = {"id": "evt_1", "type": "payment_intent.succeeded", "object": "event", "data": {"object": {}}}
    event = resolve(_example_route("stripe"), Request(ordinary, {}, {}))
    assert (event.namespace, event.event_key) == ("stripe/main", "evt_1")
    connect = resolve(_example_route("stripe-connect"), Request({**ordinary, "account": "acct_9"}, {}, {}))
    assert connect.namespace == "stripe/acct_9"


def test_the_example_routes_file_loads() -> None:
    config = load_config(EXAMPLE, _example_environ())
    assert [r.name for r in config.routes] == [
        "billing",
        "stripe",
        "stripe-connect",
        "mailera-received",
        "mailera-junk",
        "hidemy",
        "twilio-sms",
        "twilio-status",
        "slack",
        "github-push",
        "shopify",
        "acme",
        "github-app",
        "whatsapp",
        "discord",
    ]
