"""The console's cookies, its sign-in form's CSRF tokens, the open mode's secret, and where it may listen.

The session cookie holds a random session id (`console.sessions`), never
a bearer token: HttpOnly, SameSite=Strict, and, when the browser reaches
the console over https (its own TLS, or a proxy's: INBOXD_CONSOLE_HTTPS),
Secure with the `__Host-` prefix, so no other host or path can set or
shadow it. Before sign-in, a nonce cookie keys the sign-in form's CSRF
token under a key of this console instance: a page that plants a nonce
cookie still cannot compute the token (no login CSRF either).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets

SESSION_COOKIE = "inboxd_console_session"
# Before sign-in: keys the sign-in form's CSRF token.
SIGNIN_COOKIE = "inboxd_console_signin"
# Browsers keep a __Host- cookie only when Secure, with Path=/ and no Domain.
SECURE_PREFIX = "__Host-"
CSRF_FIELD = "csrf"
# The query parameter of the open mode's sign-in link (as Jupyter's ?token=).
SECRET_PARAMETER = "token"
_SIGNIN_CONTEXT = b"inboxd-console-signin-csrf-v2"


def cookie_name(base: str, *, secure: bool) -> str:
    return SECURE_PREFIX + base if secure else base


def new_nonce() -> str:
    return secrets.token_urlsafe(24)


class InstanceKey:
    """A key made at start, known to this console only: signs the sign-in form's CSRF token."""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)

    def signin_csrf(self, nonce: str) -> str:
        return hmac.new(self._key, _SIGNIN_CONTEXT + nonce.encode("utf-8"), hashlib.sha256).hexdigest()

    def signin_csrf_matches(self, nonce: str | None, presented: str | None) -> bool:
        if not nonce or not presented:
            return False
        return hmac.compare_digest(self.signin_csrf(nonce), presented)


class OpenSecret:
    """Open mode's sign-in secret: printed in the log at start, each one good for one sign-in.

    Without a tokens file nothing else stops a page on another site (DNS
    rebinding) or on another port of this host from using the console: only
    whoever reads the server's log may sign in. Once used, a fresh one is
    made, for the next sign-in (another browser, after Sign out).
    """

    def __init__(self) -> None:
        self.value = secrets.token_urlsafe(32)

    def redeem(self, presented: str | None) -> bool:
        """True once for the current secret, which is then replaced."""
        if not presented or not hmac.compare_digest(self.value.encode(), presented.strip().encode()):
            return False
        self.value = secrets.token_urlsafe(32)
        return True


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
