"""Providers' URL checks, answered before an event is named: never stored, each logged and counted.

Two kinds. Some checks carry no signature by design and come before the
signature gate: Meta's ``GET ?hub.mode=subscribe&hub.verify_token=T&hub.challenge=C``
(answered only when T is the route's ``verify_token_env`` value), Microsoft
Graph's ``?validationToken=X`` and Mandrill's and Trello's ``HEAD``. The others are signed
like any delivery and are recognised, once verified, by their body (never by
an unsigned header): Slack's ``url_verification``, Zoom's
``endpoint.url_validation`` (answered with the plain token's HMAC under the
route's first secret, so an unsigned request never gets the edge to sign
anything), Twitch's ``webhook_callback_verification``, Discord's PINGs,
GitHub's ``ping`` and Intercom's ``ping`` topic.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from inboxd_edge.hmac_template import HmacVerifier
from inboxd_edge.presets import HandshakeKind
from inboxd_edge.signatures import Verifier

TEXT = "text/plain"
JSON = "application/json"
# The longest value the edge echoes unsigned (Graph's tokens are far shorter): no free reflector for strangers.
MAX_ECHO = 1024
# Handshakes that need a route for GET (and HEAD) besides POST.
GET_HANDSHAKES: frozenset[str] = frozenset({"meta", "mandrill", "trello"})


@dataclass(frozen=True)
class Handshake:
    """The answer to a provider's URL check."""

    kind: str
    status: int
    body: bytes = b""
    content_type: str = TEXT


def before_signature(
    kind: HandshakeKind | None, method: str, query: Mapping[str, str], verify_token: str | None
) -> Handshake | None:
    """The answer to an unsigned URL check, or None when the request is not one."""
    if kind == "meta" and method == "GET":
        offered = query.get("hub.verify_token", "")
        challenge = query.get("hub.challenge", "")
        if (
            query.get("hub.mode") == "subscribe"
            and verify_token
            and len(challenge) <= MAX_ECHO
            and challenge
            and hmac.compare_digest(offered.encode(), verify_token.encode())
        ):
            return Handshake("subscribe", 200, challenge.encode())
        return Handshake("subscribe_refused", 403, b"verify token does not match")
    if kind == "microsoft-graph" and "validationToken" in query and len(query["validationToken"]) <= MAX_ECHO:
        # aiohttp has already URL-decoded it; Graph wants it back as plain text within 10 seconds.
        return Handshake("validation", 200, query["validationToken"].encode())
    if kind in ("mandrill", "trello") and method == "HEAD":
        return Handshake("head", 200)
    return None


def after_signature(kind: HandshakeKind | None, document: Any, verifier: Verifier) -> Handshake | None:
    """The answer to a signed URL check, recognised by its verified body; None for a delivery."""
    if not isinstance(document, dict):
        return None
    if kind == "slack" and document.get("type") == "url_verification":
        return Handshake("url_verification", 200, str(document.get("challenge", "")).encode())
    if kind == "zoom" and document.get("event") == "endpoint.url_validation" and isinstance(verifier, HmacVerifier):
        plain = document.get("payload", {}).get("plainToken") if isinstance(document.get("payload"), dict) else None
        if not isinstance(plain, str):
            return None
        encrypted = hmac.new(verifier.secrets[0], plain.encode(), hashlib.sha256).hexdigest()
        answer = {"plainToken": plain, "encryptedToken": encrypted}
        return Handshake("endpoint.url_validation", 200, json.dumps(answer).encode(), JSON)
    if kind == "twitch" and "challenge" in document and "event" not in document:
        return Handshake("webhook_callback_verification", 200, str(document["challenge"]).encode())
    if kind == "discord":
        # Interactions: PING is {"type": 1}, answered in kind. Webhook events: PING is type 0, answered 204.
        if document.get("type") == 1 and "event" not in document and "data" not in document:
            return Handshake("ping", 200, b'{"type": 1}', JSON)
        if document.get("type") == 0:
            return Handshake("ping", 204)
    if kind == "github" and "zen" in document and "hook_id" in document:
        return Handshake("ping", 200, b'{"outcome": "pong"}', JSON)
    if kind == "intercom" and document.get("topic") == "ping":
        # Intercom's signed notification when a webhook is registered: answered, not an event.
        return Handshake("ping", 200, b'{"outcome": "pong"}', JSON)
    return None
