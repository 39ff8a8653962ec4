"""The edge tests' real parts: signers the way providers sign, a routes file, a running edge, stored rows.

Signatures are made the providers' way, independently of the edge's verifiers:
the `standardwebhooks` library's own `sign`, and a Stripe-style and plain
HMAC signer written out here.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp
from standardwebhooks.webhooks import Webhook

from inboxd.store.database import Connection, Database

STD_SECRET = "whsec_" + base64.b64encode(b"standard-webhooks-test-secret-32b").decode()
STRIPE_OLD_SECRET = "whsec_stripe_old_secret"
STRIPE_NEW_SECRET = "whsec_stripe_new_secret"
MAILERA_SECRET = "mailera-test-secret"
HIDEMY_SECRET = "hidemy-test-secret"
STD_MAX_BODY = 2048
# The std route binds its path's {account} to a secret per account (path_secrets): each test takes an account
# of its own from this pool, and signs with that account's secret.
STD_ACCOUNTS = {
    f"acct{i:03d}": "whsec_" + base64.b64encode(hashlib.sha256(f"std-account-{i}".encode()).digest()).decode()
    for i in range(200)
}
_unused_accounts = iter(STD_ACCOUNTS)
MAILERA_JUNK_SECRET = "mailera-junk-test-secret"


def std_account() -> str:
    """An account of the std route that no other test of this run has used."""
    return next(_unused_accounts)


def routes_config(target: str, *, deadline: float = 5.0, **inboxd: Any) -> dict[str, Any]:
    """The routes every edge test uses: one per scheme; `inboxd` adds to the [inboxd] table (accept_mode, say)."""
    return {
        "inboxd": {"target": target, "deadline_seconds": deadline, **inboxd},
        "routes": [
            {
                "name": "std",
                "path": "/hooks/std/{account}",
                "scheme": "standard-webhooks",
                "path_secrets": {"placeholder": "account", "secrets": {a: [k] for a, k in STD_ACCOUNTS.items()}},
                "namespace": "std/{account}",
                "allowed_types": ["invoice.paid", "invoice.voided"],
                "max_body_bytes": STD_MAX_BODY,
            },
            {
                "name": "stripe",
                "path": "/hooks/stripe",
                "scheme": "stripe",
                # Rotation: deliveries signed with either secret are taken.
                "secrets": [STRIPE_NEW_SECRET, STRIPE_OLD_SECRET],
                "namespace": "stripe/{account}",
                "vars": {"account": "body:/account"},
                "allowed_types": ["payment_intent.succeeded"],
            },
            # Mailera's X-MailHub-Event is unsigned, so the type is the route's: one route (and secret) per type.
            *(
                {
                    "name": f"mailera-{kind}",
                    "path": f"/hooks/mailera/{kind}",
                    "scheme": "mailera",
                    "secrets": [secret],
                    "namespace": "mailera/{subscription}",
                    "vars": {"subscription": "body:/subscription_id"},
                    "event_key": "body:/message/message_id",
                    "event_type": f"const:message.{kind}",
                    "message_id": "body:/message/message_id",
                    # One Message-ID can be both received and junk: the type must be part of the key.
                    "key_includes_type": True,
                    "allowed_types": [f"message.{kind}"],
                }
                for kind, secret in (("received", MAILERA_SECRET), ("junk", MAILERA_JUNK_SECRET))
            ),
            {
                "name": "hidemy",
                "path": "/hooks/hidemy",
                "scheme": "hidemy-world",
                "secrets": [HIDEMY_SECRET],
                "namespace": "hidemy/{inbox}",
                "vars": {"inbox": "body:inbox"},
                "event_key": "body:headers.message-id",
                "event_type": "body:/event",
                "allowed_types": ["email.received"],
                "payload_drop": ["body:/delivered_at"],
            },
        ],
    }


def sign_standard(
    body: bytes, msg_id: str, *, account: str | None = None, at: float | None = None, secret: str | None = None
) -> dict[str, str]:
    """Standard Webhooks headers, signed by the `standardwebhooks` library itself (with `account`'s secret if named)."""
    stamp = datetime.fromtimestamp(int(time.time() if at is None else at), tz=UTC)
    key = secret or (STD_ACCOUNTS[account] if account else STD_SECRET)
    signature = Webhook(key).sign(msg_id, stamp, body.decode())
    return {"webhook-id": msg_id, "webhook-timestamp": str(int(stamp.timestamp())), "webhook-signature": signature}


def sign_stripe(body: bytes, secret: str, *, at: float | None = None) -> dict[str, str]:
    """A Stripe-Signature header: t=<unix>,v1=<hex HMAC-SHA256 of "{t}.{body}">."""
    stamp = str(int(time.time() if at is None else at))
    mac = hmac.new(secret.encode(), stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return {"Stripe-Signature": f"t={stamp},v1={mac}"}


def sign_hmac(body: bytes, secret: str, *, at: float | None = None, prefix: str = "") -> tuple[str, str]:
    """(timestamp, signature) for the "{timestamp}.{body}" hex schemes (Mailera, HideMy.world)."""
    stamp = str(int(time.time() if at is None else at))
    mac = hmac.new(secret.encode(), stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return stamp, prefix + mac


def as_body(document: Any) -> bytes:
    return json.dumps(document).encode()


@dataclass(frozen=True)
class Reply:
    status: int
    outcome: str


async def post(http: aiohttp.ClientSession, url: str, body: bytes, headers: dict[str, str]) -> Reply:
    """POSTs raw bytes (no client-side JSON handling: the signature covers these exact bytes)."""
    async with http.post(url, data=body, headers={"Content-Type": "application/json", **headers}) as response:
        answer = await response.json()
        return Reply(response.status, str(answer.get("outcome")))


async def stored_events(db: Database, namespace: str) -> dict[str, dict[str, Any]]:
    """The rows inbox_events holds for `namespace`, by event key."""

    async def work(conn: Connection) -> dict[str, dict[str, Any]]:
        cur = await conn.execute(
            "SELECT event_key, event_type, inboxd_payload_json(e) AS payload, metadata, message_id, state"
            " FROM inbox_events AS e WHERE namespace = %s",
            (namespace,),
        )
        names = [c.name for c in cur.description or ()]
        return {str(row[0]): dict(zip(names, row, strict=True)) for row in await cur.fetchall()}

    return await db.run(work)
