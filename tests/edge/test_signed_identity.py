"""An event's namespace, key, type and ordering key come only from signed parts or from the route's configuration.

Each case replays what an outside review did with one signed delivery inside
its timestamp window: change the unsigned type header, post it to another
account's path, or smuggle an encoded path, and get a new event out of it.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from inboxd.store.database import Database
from inboxd_edge.config import ConfigError, config_from_data
from inboxd_edge.identity import constrained_path
from inboxd_edge.serve import RunningEdge
from tests.edge.rig import (
    MAILERA_JUNK_SECRET,
    MAILERA_SECRET,
    STD_ACCOUNTS,
    STD_SECRET,
    as_body,
    post,
    routes_config,
    sign_hmac,
    sign_standard,
    std_account,
    stored_events,
)


def one_route(**route: Any) -> dict[str, Any]:
    base = {
        "name": "r",
        "path": "/hooks/r",
        "scheme": "standard-webhooks",
        "secrets": [STD_SECRET],
        "namespace": "r",
        "allowed_types": ["invoice.paid"],
    }
    return {"inboxd": {"target": "127.0.0.1:1"}, "routes": [{**base, **route}]}


@pytest.mark.parametrize(
    ("route", "complaint"),
    [
        # Mailera signs "{timestamp}.{body}": its event header is the sender's to choose.
        (
            {"scheme": "mailera", "secrets": ["s"], "event_key": "body:/id", "event_type": "header:X-MailHub-Event"},
            r"event_type comes from header:X-MailHub-Event, which the signature does not cover",
        ),
        (
            {"scheme": "mailera", "secrets": ["s"], "event_key": "header:X-MailHub-Delivery", "event_type": "body:/t"},
            r"event_key comes from header:X-MailHub-Delivery",
        ),
        ({"ordering_key": "header:X-Order"}, r"ordering_key comes from header:X-Order"),
        (
            {"path": "/hooks/r/{account}", "namespace": "r/{account}"},
            r"namespace's \{account\} comes from path:account.*path_secrets",
        ),
        (
            {"path": "/hooks/r/{account}", "namespace": "r/{tenant}", "vars": {"tenant": "path:account"}},
            r"namespace's \{tenant\} comes from path:account",
        ),
        (
            {"stripe": None, "scheme": "stripe", "secrets": ["s"], "event_key": "header:Stripe-Signature"},
            r"event_key comes from header:Stripe-Signature",
        ),
    ],
    ids=[
        "mailera type header",
        "unsigned key header",
        "ordering key header",
        "path account",
        "path via vars",
        "stripe",
    ],
)
def test_a_route_that_takes_identity_from_an_unsigned_part_is_refused(route: dict[str, Any], complaint: str) -> None:
    route.pop("stripe", None)
    with pytest.raises(ConfigError, match=complaint):
        config_from_data(one_route(**route), {})


def test_signed_headers_const_values_and_bound_placeholders_are_accepted() -> None:
    # The Standard Webhooks id and an HMAC scheme's timestamp are signed.
    config_from_data(one_route(event_key="header:webhook-id", event_type="body:/type"), {})
    config_from_data(
        one_route(scheme="mailera", secrets=["s"], event_key="header:X-MailHub-Timestamp", event_type="const:x"), {}
    )
    bound = one_route(
        path="/hooks/r/{account}",
        namespace="r/{account}",
        path_secrets={"placeholder": "account", "secrets": {"a": [STD_SECRET]}},
    )
    del bound["routes"][0]["secrets"]
    config_from_data(bound, {})


def test_two_routes_or_two_accounts_sharing_a_secret_are_refused() -> None:
    data = one_route()
    data["routes"].append({**data["routes"][0], "name": "other", "path": "/hooks/other", "namespace": "other"})
    with pytest.raises(ConfigError, match="route r and route other share a secret"):
        config_from_data(data, {})
    shared = one_route(path="/hooks/r/{account}", namespace="r/{account}")
    del shared["routes"][0]["secrets"]
    shared["routes"][0]["path_secrets"] = {"placeholder": "account", "secrets": {"a": [STD_SECRET], "b": [STD_SECRET]}}
    with pytest.raises(ConfigError, match="account='a' and route r account='b' share a secret"):
        config_from_data(shared, {})


def test_path_secrets_must_name_a_placeholder_of_the_path_and_hold_secrets_only_there() -> None:
    data = one_route(path="/hooks/r/{account}", path_secrets={"placeholder": "acount", "secrets": {"a": ["s"]}})
    del data["routes"][0]["secrets"]
    with pytest.raises(ConfigError, match="placeholder must name one of the path's placeholders"):
        config_from_data(data, {})
    with pytest.raises(ConfigError, match="takes its secrets from there only"):
        config_from_data(one_route(path="/hooks/r/{account}", path_secrets={"placeholder": "account"}), {})


def test_bare_placeholders_are_held_to_one_plain_segment() -> None:
    assert constrained_path("/hooks/{account}/x/{id:\\d+}") == (
        "/hooks/{account:[A-Za-z0-9][A-Za-z0-9._~@+-]*}/x/{id:\\d+}"
    )


async def test_a_delivery_signed_for_one_account_is_refused_on_another_accounts_path(
    edge: RunningEdge, http: aiohttp.ClientSession, db: Database
) -> None:
    mine, theirs = std_account(), std_account()
    body = as_body({"type": "invoice.paid", "data": {"amount": 1}})
    headers = sign_standard(body, "msg_x", account=mine)
    assert (await post(http, f"{edge.url}/hooks/std/{mine}", body, headers)).outcome == "accepted"
    reposted = await post(http, f"{edge.url}/hooks/std/{theirs}", body, headers)
    assert (reposted.status, reposted.outcome) == (401, "unauthenticated")
    assert await stored_events(db, f"std/{theirs}") == {}


@pytest.mark.parametrize("path", ["nobody", "acct%2F..%2Fx", "a" * 200, "..", "%2e%2e"])
async def test_an_unknown_or_smuggled_account_path_is_not_found_and_mints_no_namespace(
    edge: RunningEdge, http: aiohttp.ClientSession, path: str
) -> None:
    body = as_body({"type": "invoice.paid"})
    reply_status = 0
    async with http.post(
        f"{edge.url}/hooks/std/{path}", data=body, headers=sign_standard(body, "m", secret=STD_SECRET)
    ) as response:
        reply_status = response.status
    assert reply_status == 404
    assert path not in STD_ACCOUNTS


async def test_a_mailera_delivery_reposted_to_the_other_types_route_is_refused_and_its_type_header_ignored(
    edge: RunningEdge, http: aiohttp.ClientSession, db: Database
) -> None:
    subscription = "sub_repost"
    body = as_body({"subscription_id": subscription, "message": {"message_id": "<r@x>"}})
    stamp, signature = sign_hmac(body, MAILERA_SECRET)
    headers = {"X-MailHub-Signature": signature, "X-MailHub-Timestamp": stamp, "X-MailHub-Event": "message.junk"}
    assert (await post(http, f"{edge.url}/hooks/mailera/received", body, headers)).outcome == "accepted"
    reposted = await post(http, f"{edge.url}/hooks/mailera/junk", body, headers)
    assert (reposted.status, reposted.outcome) == (401, "unauthenticated")
    assert set(await stored_events(db, f"mailera/{subscription}")) == {"message.received:<r@x>"}
    assert MAILERA_JUNK_SECRET != MAILERA_SECRET


def test_the_test_rig_itself_obeys_the_rules() -> None:
    config_from_data(routes_config("127.0.0.1:1"), {})
