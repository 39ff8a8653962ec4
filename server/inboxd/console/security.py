"""Who is signed in to the console, its CSRF tokens, and where it may listen.

The session cookie holds the bearer token itself (HttpOnly, SameSite=Strict,
Secure under TLS), so the console keeps no session state: every request is
authenticated against the tokens file as an RPC would be, and a token
revoked by SIGHUP is refused at its next click. A form's CSRF token is an
HMAC keyed by the cookie's value: a page on another origin can neither read
the cookie nor compute the token, and any server process can check it.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets

from inboxd.config.tokens import ANONYMOUS, Caller, Scope, TokenRegistry
from inboxd.domain.errors import Unauthenticated

SESSION_COOKIE = "inboxd_console"
# Before sign-in: keys the sign-in form's CSRF token (no login CSRF either).
SIGNIN_COOKIE = "inboxd_console_signin"
CSRF_FIELD = "csrf"
_CSRF_CONTEXT = b"inboxd-console-csrf-v1"
# Without a tokens file the console is as open as the RPCs (loopback only):
# the cookie then holds a random value of this form, which only keys CSRF tokens.
OPEN_SESSION_PREFIX = "open:"


def csrf_token(cookie_value: str) -> str:
    return hmac.new(cookie_value.encode("utf-8"), _CSRF_CONTEXT, hashlib.sha256).hexdigest()


def csrf_matches(cookie_value: str | None, presented: str | None) -> bool:
    if not cookie_value or not presented:
        return False
    return hmac.compare_digest(csrf_token(cookie_value), presented)


def new_nonce() -> str:
    return secrets.token_urlsafe(24)


def open_session() -> str:
    return OPEN_SESSION_PREFIX + new_nonce()


def signed_in_caller(registry: TokenRegistry | None, cookie_value: str | None) -> Caller:
    """The caller behind a session cookie, holding the admin scope; raises Unauthenticated/PermissionDenied."""
    if not cookie_value:
        raise Unauthenticated("not signed in")
    if registry is None:
        caller = ANONYMOUS
    else:
        caller = registry.authenticate(cookie_value)
    caller.require_scope(Scope.ADMIN)
    return caller


def is_loopback(listen: str) -> bool:
    host = listen.rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name or a wildcard (0.0.0.0, empty): assume it reaches out


def exposure_refusal(listen: str, *, tokens_file: bool, tls: bool, trusted_network: bool) -> str | None:
    """Why the console must not listen on `listen` (a token would leak), or None."""
    if is_loopback(listen):
        return None
    if not tokens_file:
        return (
            f"refusing to serve the console on {listen} without a tokens file: anyone on the network could "
            "replay events. Set INBOXD_TOKENS_FILE, or set INBOXD_CONSOLE_LISTEN to 127.0.0.1:PORT."
        )
    if not tls and not trusted_network:
        return (
            f"refusing to serve the console on {listen} without TLS: sign-in tokens and session cookies would "
            "cross the network in plaintext. Set INBOXD_TLS_CERT and INBOXD_TLS_KEY, listen on 127.0.0.1, or, "
            "when a proxy in front terminates TLS on a network you trust, set INBOXD_TRUSTED_NETWORK=1."
        )
    return None
