"""Senders built on Svix (Clerk, Resend, ...) sign with Svix's library and send svix-* headers: the edge reads them.

Svix's header names are the Standard Webhooks ones under another prefix; a
signature header may list several ``v1,`` signatures while the sender rotates
its secret, and ``v1a,`` (asymmetric) entries the edge has no key for.
"""

from __future__ import annotations

import base64
import time
from datetime import UTC, datetime

import aiohttp
import pytest
from nacl.signing import SigningKey
from standardwebhooks.webhooks import Webhook as StandardWebhook
from svix.webhooks import Webhook as SvixWebhook

from inboxd.store.database import Database
from inboxd_edge.serve import RunningEdge
from inboxd_edge.signatures import SignatureError, StandardWebhooksVerifier
from tests.edge.rig import STD_ACCOUNTS, STD_SECRET, as_body, post, std_account, stored_events

OTHER_SECRET = "whsec_" + base64.b64encode(b"another-senders-secret-32-bytes!").decode()


def svix_headers(secret: str, msg_id: str, body: bytes, at: float | None = None) -> dict[str, str]:
    stamp = datetime.fromtimestamp(int(time.time() if at is None else at), tz=UTC)
    signature = SvixWebhook(secret).sign(msg_id, stamp, body.decode())
    return {"svix-id": msg_id, "svix-timestamp": str(int(stamp.timestamp())), "svix-signature": signature}


async def test_a_delivery_signed_by_svix_with_svix_headers_is_accepted_and_keyed_by_its_svix_id(
    edge: RunningEdge, http: aiohttp.ClientSession, db: Database
) -> None:
    acct = std_account()
    body = as_body({"type": "invoice.paid", "data": {"id": "in_svix"}})
    headers = svix_headers(STD_ACCOUNTS[acct], "msg_svix_1", body)
    # Svix's own verifier takes what it signed: the test signs as the provider does.
    SvixWebhook(STD_ACCOUNTS[acct]).verify(body, headers)
    first = await post(http, f"{edge.url}/hooks/std/{acct}", body, headers)
    again = await post(http, f"{edge.url}/hooks/std/{acct}", body, svix_headers(STD_ACCOUNTS[acct], "msg_svix_1", body))
    assert (first.status, first.outcome, again.outcome) == (200, "accepted", "duplicate")
    rows = await stored_events(db, f"std/{acct}")
    assert list(rows) == ["msg_svix_1"]
    assert rows["msg_svix_1"]["metadata"]["inboxd.signature.svix-id"] == "msg_svix_1"


def test_a_signature_list_is_searched_for_any_v1_match_and_skips_v1a_and_garbage() -> None:
    body = b'{"type": "invoice.paid"}'
    now = time.time()
    stamp = datetime.fromtimestamp(int(now), tz=UTC)
    good = StandardWebhook(STD_SECRET).sign("msg_r", stamp, body.decode())
    other = StandardWebhook(OTHER_SECRET).sign("msg_r", stamp, body.decode())
    verifier = StandardWebhooksVerifier.from_secrets([STD_SECRET], 300.0)
    base = {"svix-id": "msg_r", "svix-timestamp": str(int(now))}
    # The sender rotating: its old and new signatures side by side, an asymmetric one and a broken one beside.
    listed = f"v1a,{base64.b64encode(b'x' * 64).decode()} v1,not-base64! {other} {good}"
    verifier.verify(body, {**base, "svix-signature": listed}, now)
    for refused in (f"v1a,{good.partition(',')[2]}", other, f"{other} v1a,{good.partition(',')[2]}"):
        with pytest.raises(SignatureError, match="no matching signature"):
            verifier.verify(body, {**base, "svix-signature": refused}, now)


def test_svix_and_webhook_headers_are_one_and_the_same_scheme() -> None:
    body = b'{"type": "invoice.paid"}'
    now = time.time()
    verifier = StandardWebhooksVerifier.from_secrets([STD_SECRET], 300.0)
    svix = svix_headers(STD_SECRET, "msg_same", body, now)
    verifier.verify(body, svix, now)
    verifier.verify(body, {k.replace("svix-", "webhook-"): v for k, v in svix.items()}, now)
    # A signature moved to another id does not verify, whichever prefix carries it.
    with pytest.raises(SignatureError, match="no matching signature"):
        verifier.verify(body, {**svix, "svix-id": "msg_other"}, now)


def test_a_v1a_signature_is_verified_against_the_routes_whpk_public_key_and_nothing_else() -> None:
    signing = SigningKey.generate()
    public = "whpk_" + base64.b64encode(signing.verify_key.encode()).decode()
    body = b'{"type": "invoice.paid"}'
    now = time.time()
    headers = {"webhook-id": "msg_a", "webhook-timestamp": str(int(now))}
    signature = base64.b64encode(
        signing.sign(b"msg_a." + headers["webhook-timestamp"].encode() + b"." + body).signature
    )
    listed = f"v1,{base64.b64encode(b'y' * 32).decode()} v1a,{signature.decode()}"
    StandardWebhooksVerifier.from_secrets([public], 300.0).verify(body, {**headers, "webhook-signature": listed}, now)
    other = "whpk_" + base64.b64encode(SigningKey.generate().verify_key.encode()).decode()
    for keys in ([other], [STD_SECRET]):
        with pytest.raises(SignatureError, match="no matching signature"):
            StandardWebhooksVerifier.from_secrets(keys, 300.0).verify(
                body, {**headers, "webhook-signature": listed}, now
            )
    with pytest.raises(SignatureError, match="no matching signature"):
        StandardWebhooksVerifier.from_secrets([public], 300.0).verify(
            body + b" ", {**headers, "webhook-signature": listed}, now
        )
