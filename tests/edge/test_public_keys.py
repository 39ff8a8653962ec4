"""Public-key presets through a real edge: SendGrid's batch (ECDSA P-256) and Telnyx (Ed25519), and their keys.

The deliveries are signed with `cryptography` (SendGrid's ECDSA) and PyNaCl
(Telnyx's Ed25519) using fresh key pairs; the route holds only the public key.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from nacl.signing import SigningKey

from inboxd.serving.server import RunningServer
from inboxd.store.database import Database
from inboxd_edge.config import ConfigError, config_from_data
from inboxd_edge.serve import RunningEdge, start_edge
from tests.edge.rig import post, stored_events

SENDGRID = ec.generate_private_key(ec.SECP256R1())
SENDGRID_PUBLIC = base64.b64encode(
    SENDGRID.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
).decode()
TELNYX = SigningKey.generate()


def routes(target: str, **sendgrid: Any) -> dict[str, Any]:
    return {
        "inboxd": {"target": target},
        "routes": [
            {
                "name": "sendgrid",
                "path": "/hooks/sendgrid",
                "scheme": "sendgrid",
                "public_key_env": "SENDGRID_KEY",
                "namespace": "pk/sendgrid",
                "allowed_types": ["delivered", "open"],
                **sendgrid,
            },
            {
                "name": "telnyx",
                "path": "/hooks/telnyx",
                "scheme": "telnyx",
                "public_key": base64.b64encode(TELNYX.verify_key.encode()).decode(),
                "namespace": "pk/telnyx",
                "allowed_types": ["message.received"],
            },
        ],
    }


@pytest.fixture(scope="module")
async def edge(server: RunningServer) -> AsyncIterator[RunningEdge]:
    config = config_from_data(routes(f"127.0.0.1:{server.port}"), {"SENDGRID_KEY": SENDGRID_PUBLIC})
    running = await start_edge(config, listen="127.0.0.1:0")
    yield running
    await running.stop()


async def test_a_sendgrid_batch_signed_with_its_ecdsa_key_is_one_event_per_item(
    edge: RunningEdge, http: aiohttp.ClientSession, db: Database
) -> None:
    events = [
        {"email": "a@example.test", "event": "delivered", "sg_event_id": "sg-1", "timestamp": 1},
        {"email": "a@example.test", "event": "open", "sg_event_id": "sg-2", "timestamp": 2},
    ]
    body = json.dumps(events).encode()
    stamp = str(int(time.time()))
    signature = base64.b64encode(SENDGRID.sign(stamp.encode() + body, ec.ECDSA(hashes.SHA256()))).decode()
    headers = {
        "X-Twilio-Email-Event-Webhook-Signature": signature,
        "X-Twilio-Email-Event-Webhook-Timestamp": stamp,
    }
    reply = await post(http, f"{edge.url}/hooks/sendgrid", body, headers)
    assert (reply.status, reply.outcome) == (202, "accepted")
    rows = await stored_events(db, "pk/sendgrid")
    assert {k: r["event_type"] for k, r in rows.items()} == {"sg-1": "delivered", "sg-2": "open"}
    tampered = body.replace(b"sg-2", b"sg-3")
    assert (await post(http, f"{edge.url}/hooks/sendgrid", tampered, headers)).status == 401


async def test_a_telnyx_event_signed_with_its_ed25519_key_is_taken_and_a_changed_byte_refused(
    edge: RunningEdge, http: aiohttp.ClientSession, db: Database
) -> None:
    body = json.dumps({"data": {"id": "tx-1", "event_type": "message.received", "payload": {"text": "hi"}}}).encode()
    stamp = str(int(time.time()))
    signature = base64.b64encode(TELNYX.sign(stamp.encode() + b"|" + body).signature).decode()
    headers = {"telnyx-signature-ed25519": signature, "telnyx-timestamp": stamp}
    assert (await post(http, f"{edge.url}/hooks/telnyx", body, headers)).outcome == "accepted"
    assert (await post(http, f"{edge.url}/hooks/telnyx", body.replace(b"hi", b"ho"), headers)).status == 401
    assert list(await stored_events(db, "pk/telnyx")) == ["tx-1"]


@pytest.mark.parametrize(
    ("sendgrid", "complaint"),
    [
        ({"public_key_env": "UNSET"}, "public_key_env names 'UNSET', which is unset or empty"),
        ({"public_key": base64.b64encode(TELNYX.verify_key.encode()).decode()}, "not an ecdsa-p256 key"),
        ({"public_key": "not a key!"}, "PEM, hex or base64"),
        ({"secrets": ["s"]}, "verifies with the provider's public key"),
    ],
)
def test_a_public_key_route_names_what_is_wrong_with_its_key(sendgrid: dict[str, Any], complaint: str) -> None:
    data = routes("127.0.0.1:1", **sendgrid)
    if "public_key" in sendgrid or "secrets" in sendgrid:
        del data["routes"][0]["public_key_env"]
    with pytest.raises(ConfigError, match=complaint):
        config_from_data(data, {"SENDGRID_KEY": SENDGRID_PUBLIC})
