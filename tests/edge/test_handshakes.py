"""Each provider's URL check, sent as the provider sends it: answered as the provider wants, and nothing stored.

The edge runs in front of the session's inboxd with one route per provider.
Signed checks are signed with the provider's own library where it has one
(slack_sdk; PyNaCl for Discord's Ed25519) and otherwise as its documentation
says; each check is also sent unsigned or wrongly signed, and refused.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from nacl.signing import SigningKey
from slack_sdk.signature import SignatureVerifier

from inboxd.serving.server import RunningServer
from inboxd.store.database import Database
from inboxd_edge.config import config_from_data
from inboxd_edge.serve import RunningEdge, start_edge
from tests.edge.rig import stored_events

SLACK = "hs-slack-secret"
META = "hs-meta-app-secret"
META_VERIFY = "hs-meta-verify-token"
ZOOM = "hs-zoom-secret-token"
TWITCH = "hs-twitch-secret"
GRAPH_STATE = "hs-graph-client-state"
GITHUB = "hs-github-secret"
DISCORD_KEY = SigningKey(hashlib.sha256(b"hs-discord").digest())
ENV = {"META_VERIFY": META_VERIFY, "GRAPH_STATE": GRAPH_STATE}


def routes(target: str) -> dict[str, Any]:
    def route(name: str, scheme: str, **extra: Any) -> dict[str, Any]:
        return {"name": name, "path": f"/hs/{name}", "scheme": scheme, "namespace": f"hs/{name}", **extra}

    return {
        "inboxd": {"target": target, "deadline_seconds": 5.0},
        "routes": [
            route(
                "slack",
                "slack",
                secrets=[SLACK],
                event_key="body:/event_id",
                event_type="body:/event/type",
                allowed_types=["app_mention"],
            ),
            route("meta", "meta", secrets=[META], verify_token_env="META_VERIFY", allowed_types=["page"]),
            route("zoom", "zoom", secrets=[ZOOM], allowed_types=["meeting.started"]),
            route("twitch", "twitch", secrets=[TWITCH], allowed_types=["channel.follow"]),
            route("graph", "microsoft-graph", client_state_env="GRAPH_STATE", allowed_types=["created", "updated"]),
            route("discord", "discord", public_key=DISCORD_KEY.verify_key.encode().hex(), allowed_types=["2"]),
            route("github", "github", secrets=[GITHUB], event_type="const:push", allowed_types=["push"]),
            route("intercom", "intercom", secrets=["hs-intercom-secret"], allowed_types=["conversation.user.created"]),
            route(
                "mandrill",
                "mandrill",
                secrets=["hs-mandrill-key"],
                public_url="https://hooks.example.test/hs/mandrill",
                event_type="const:events",
                allowed_types=["events"],
            ),
        ],
    }


@pytest.fixture(scope="module")
async def edge(server: RunningServer) -> AsyncIterator[RunningEdge]:
    running = await start_edge(config_from_data(routes(f"127.0.0.1:{server.port}"), ENV), listen="127.0.0.1:0")
    yield running
    await running.stop()


async def send(
    http: aiohttp.ClientSession, method: str, url: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> tuple[int, str, bytes]:
    async with http.request(
        method, url, data=body, headers={"Content-Type": "application/json", **(headers or {})}
    ) as r:
        return r.status, r.content_type, await r.read()


async def nothing_stored(db: Database, name: str) -> None:
    assert await stored_events(db, f"hs/{name}") == {}


def slack_signed(body: bytes, secret: str = SLACK) -> dict[str, str]:
    stamp = str(int(time.time()))
    signature = SignatureVerifier(secret).generate_signature(timestamp=stamp, body=body)
    assert signature is not None
    return {"X-Slack-Signature": signature, "X-Slack-Request-Timestamp": stamp}


async def test_slacks_signed_url_verification_is_answered_with_its_challenge_and_nothing_stored(
    edge: RunningEdge, http: aiohttp.ClientSession, db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    body = json.dumps(
        {"token": "t", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", "type": "url_verification"}
    ).encode()
    with caplog.at_level(logging.INFO, logger="inboxd_edge.observations"):
        status, kind, answer = await send(http, "POST", f"{edge.url}/hs/slack", body, slack_signed(body))
    assert (status, kind, answer) == (200, "text/plain", b"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P")
    assert "handshake route='slack' kind='url_verification'" in caplog.text
    assert (await send(http, "POST", f"{edge.url}/hs/slack", body, slack_signed(body, "not-slacks")))[0] == 401
    await nothing_stored(db, "slack")


async def test_metas_subscribe_get_is_answered_only_with_the_routes_verify_token(
    edge: RunningEdge, http: aiohttp.ClientSession, db: Database
) -> None:
    query = "hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token="
    assert await send(http, "GET", f"{edge.url}/hs/meta?{query}{META_VERIFY}") == (200, "text/plain", b"1158201444")
    status, _, _ = await send(http, "GET", f"{edge.url}/hs/meta?{query}someone-elses")
    assert status == 403
    # A delivery is a POST signed with the app secret.
    body = b'{"object": "page", "entry": [{"id": "1", "time": 1}]}'
    signature = "sha256=" + hmac.new(META.encode(), body, hashlib.sha256).hexdigest()
    assert (await send(http, "POST", f"{edge.url}/hs/meta", body, {"X-Hub-Signature-256": signature}))[0] == 200
    assert [row["event_type"] for row in (await stored_events(db, "hs/meta")).values()] == ["page"]


async def test_zooms_url_validation_gets_the_plain_tokens_hmac_only_when_signed(
    edge: RunningEdge, http: aiohttp.ClientSession, db: Database
) -> None:
    body = (
        b'{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,'
        b'"event":"endpoint.url_validation"}'
    )
    stamp = str(int(time.time()))
    mac = hmac.new(ZOOM.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256).hexdigest()
    headers = {"x-zm-signature": f"v0={mac}", "x-zm-request-timestamp": stamp}
    status, kind, answer = await send(http, "POST", f"{edge.url}/hs/zoom", body, headers)
    expected = hmac.new(ZOOM.encode(), b"qgg8vlvZRS6UYooatFL8Aw", hashlib.sha256).hexdigest()
    assert (status, kind) == (200, "application/json")
    assert json.loads(answer) == {"plainToken": "qgg8vlvZRS6UYooatFL8Aw", "encryptedToken": expected}
    # Unsigned, the edge signs nothing for anyone.
    assert (await send(http, "POST", f"{edge.url}/hs/zoom", body))[0] == 401
    await nothing_stored(db, "zoom")


def twitch_signed(body: bytes, message_id: str, message_type: str) -> dict[str, str]:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + ".634234626Z"
    mac = hmac.new(TWITCH.encode(), message_id.encode() + stamp.encode() + body, hashlib.sha256).hexdigest()
    return {
        "Twitch-Eventsub-Message-Id": message_id,
        "Twitch-Eventsub-Message-Timestamp": stamp,
        "Twitch-Eventsub-Message-Signature": f"sha256={mac}",
        "Twitch-Eventsub-Message-Type": message_type,
    }


async def test_twitchs_callback_verification_is_answered_with_its_challenge_and_a_notification_is_an_event(
    edge: RunningEdge, http: aiohttp.ClientSession, db: Database
) -> None:
    subscription = {
        "id": "f1c2a387",
        "type": "channel.follow",
        "version": "2",
        "status": "webhook_callback_verification_pending",
    }
    body = json.dumps({"challenge": "pogchamp-kappa-360noscope-vohiyo", "subscription": subscription}).encode()
    headers = twitch_signed(body, "e76c6bd4", "webhook_callback_verification")
    status, kind, answer = await send(http, "POST", f"{edge.url}/hs/twitch", body, headers)
    assert (status, kind, answer) == (200, "text/plain", b"pogchamp-kappa-360noscope-vohiyo")
    await nothing_stored(db, "twitch")
    note = json.dumps({"subscription": {**subscription, "status": "enabled"}, "event": {"user_id": "1"}}).encode()
    assert (await send(http, "POST", f"{edge.url}/hs/twitch", note, twitch_signed(note, "msg-2", "notification")))[
        0
    ] == 200
    assert list(await stored_events(db, "hs/twitch")) == ["msg-2"]


async def test_graphs_validation_token_is_echoed_and_each_notification_item_is_its_own_event(
    edge: RunningEdge, http: aiohttp.ClientSession, db: Database
) -> None:
    status, kind, answer = await send(
        http, "POST", f"{edge.url}/hs/graph?validationToken=Validation%3A%20Testing%20client"
    )
    assert (status, kind, answer) == (200, "text/plain", b"Validation: Testing client")
    # The edge echoes no unsigned value longer than any token Graph sends.
    assert (await send(http, "POST", f"{edge.url}/hs/graph?validationToken={'x' * 1025}"))[0] == 401
    await nothing_stored(db, "graph")

    def item(change: str, resource: str, state: str = GRAPH_STATE) -> dict[str, Any]:
        return {
            "subscriptionId": "sub1",
            "clientState": state,
            "changeType": change,
            "resource": resource,
            "tenantId": "t",
        }

    wrong = json.dumps({"value": [item("created", "Users/a/Messages/1"), item("updated", "x", "guess")]}).encode()
    assert (await send(http, "POST", f"{edge.url}/hs/graph", wrong))[0] == 401
    await nothing_stored(db, "graph")
    body = json.dumps(
        {"value": [item("created", "Users/a/Messages/1"), item("updated", "Users/a/Messages/1")]}
    ).encode()
    status, _, answer = await send(http, "POST", f"{edge.url}/hs/graph", body)
    assert (status, json.loads(answer)) == (202, {"outcome": "accepted"})
    rows = await stored_events(db, "hs/graph")
    assert sorted(r["event_type"] for r in rows.values()) == ["created", "updated"]
    # The client state is the route's shared value: checked, never stored.
    assert all("clientState" not in r["payload"] for r in rows.values())
    status, _, answer = await send(http, "POST", f"{edge.url}/hs/graph", body)
    assert (status, json.loads(answer)) == (202, {"outcome": "duplicate"})


def discord_signed(body: bytes, key: SigningKey = DISCORD_KEY) -> dict[str, str]:
    stamp = str(int(time.time()))
    return {"X-Signature-Ed25519": key.sign(stamp.encode() + body).signature.hex(), "X-Signature-Timestamp": stamp}


async def test_discords_pings_are_answered_in_kind_only_when_signed_by_its_key(
    edge: RunningEdge, http: aiohttp.ClientSession, db: Database
) -> None:
    ping = b'{"id": "1", "application_id": "2", "type": 1, "token": "t", "version": 1}'
    status, kind, answer = await send(http, "POST", f"{edge.url}/hs/discord", ping, discord_signed(ping))
    assert (status, kind, json.loads(answer)) == (200, "application/json", {"type": 1})
    # Discord checks that a wrongly signed PING is refused before it saves the URL.
    other = SigningKey(hashlib.sha256(b"someone else").digest())
    assert (await send(http, "POST", f"{edge.url}/hs/discord", ping, discord_signed(ping, other)))[0] == 401
    # Webhook events' PING is type 0, answered 204.
    event_ping = b'{"version": 1, "application_id": "2", "type": 0}'
    assert (await send(http, "POST", f"{edge.url}/hs/discord", event_ping, discord_signed(event_ping)))[0] == 204
    await nothing_stored(db, "discord")
    command = b'{"id": "i-3", "application_id": "2", "type": 2, "data": {"name": "hi"}, "token": "t", "version": 1}'
    assert (await send(http, "POST", f"{edge.url}/hs/discord", command, discord_signed(command)))[0] == 200
    assert list(await stored_events(db, "hs/discord")) == ["i-3"]


async def test_githubs_ping_is_answered_pong_and_not_handed_to_a_worker_as_a_push(
    edge: RunningEdge, http: aiohttp.ClientSession, db: Database
) -> None:
    body = json.dumps({"zen": "Keep it logically awesome.", "hook_id": 1, "hook": {"type": "Repository"}}).encode()
    signature = "sha256=" + hmac.new(GITHUB.encode(), body, hashlib.sha256).hexdigest()
    headers = {"X-Hub-Signature-256": signature, "X-GitHub-Event": "ping"}
    status, _, answer = await send(http, "POST", f"{edge.url}/hs/github", body, headers)
    assert (status, json.loads(answer)) == (200, {"outcome": "pong"})
    await nothing_stored(db, "github")


async def test_mandrills_head_check_is_answered_and_a_get_on_a_post_only_route_is_not(
    edge: RunningEdge, http: aiohttp.ClientSession, db: Database
) -> None:
    assert (await send(http, "HEAD", f"{edge.url}/hs/mandrill"))[0] == 200
    assert (await send(http, "GET", f"{edge.url}/hs/mandrill"))[0] == 405
    assert (await send(http, "GET", f"{edge.url}/hs/zoom"))[0] == 405
    await nothing_stored(db, "mandrill")


async def test_intercoms_signed_ping_topic_is_answered_and_not_stored(
    edge: RunningEdge, http: aiohttp.ClientSession, db: Database
) -> None:
    body = json.dumps({"type": "notification_event", "id": "notif_1", "topic": "ping", "data": {"item": {}}}).encode()
    signature = "sha1=" + hmac.new(b"hs-intercom-secret", body, hashlib.sha1).hexdigest()
    status, _, answer = await send(http, "POST", f"{edge.url}/hs/intercom", body, {"X-Hub-Signature": signature})
    assert (status, json.loads(answer)) == (200, {"outcome": "pong"})
    assert (await send(http, "POST", f"{edge.url}/hs/intercom", body, {"X-Hub-Signature": "sha1=" + "0" * 40}))[
        0
    ] == 401
    await nothing_stored(db, "intercom")
