"""Signing in and out of the console: the sign-in form, a token or open mode's one-time secret, Sign out.

A sign-in opens a session (`console.sessions`) and sets only its random id
as the cookie; Sign out ends the session here, not just the browser's copy.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from aiohttp import web

from inboxd.config.tokens import ANONYMOUS, Caller, Scope, TokenRegistry
from inboxd.console import security
from inboxd.console.html import html_response, redirect
from inboxd.console.pages import signin_page
from inboxd.console.sessions import Sessions
from inboxd.domain.errors import PermissionDenied, Unauthenticated

log = logging.getLogger(__name__)

_STALE_SECRET = (
    "That is not the current sign-in secret: each one signs in once. "
    "The server's log names the link for the next sign-in."
)


class SignIn:
    """The routes /signin (GET and POST) and /signout of one console."""

    def __init__(
        self,
        *,
        registry: TokenRegistry | None,
        sessions: Sessions,
        key: security.InstanceKey,
        open_secret: security.OpenSecret | None,
        https: bool,
        session_cookie: str,
        signin_cookie: str,
        signin_url: Callable[[], str | None],
    ) -> None:
        # Given what signing in needs, not the app: `registry` None is open mode, where `open_secret` signs
        # in; `signin_url` names the next one-time link (the port is known only once the console listens).
        self.registry = registry
        self.sessions = sessions
        self.key = key
        self.open_secret = open_secret
        self.https = https
        self.session_cookie = session_cookie
        self.signin_cookie = signin_cookie
        self.signin_url = signin_url

    def _set_cookie(self, response: web.Response, name: str, value: str) -> None:
        response.set_cookie(name, value, httponly=True, samesite="Strict", secure=self.https, path="/")

    def _del_cookie(self, response: web.Response, name: str) -> None:
        # A browser ignores the deletion of a __Host- cookie that is not Secure itself.
        response.del_cookie(name, path="/", secure=self.https, httponly=True, samesite="Strict")

    async def page(self, request: web.Request) -> web.Response:
        """GET /signin: the form; in open mode, with ?token=<the secret from the log>, the sign-in itself."""
        secret = request.query.get(security.SECRET_PARAMETER)
        if self.open_secret is not None and secret is not None:
            return await self._open_session(request, secret)
        return await self.form(request)

    async def form(self, request: web.Request, error: str | None = None, status: int = 200) -> web.Response:
        nonce = request.cookies.get(self.signin_cookie) or security.new_nonce()
        page = signin_page(self.key.signin_csrf(nonce), error=error, open_mode=self.registry is None)
        response = html_response(page, status)
        self._set_cookie(response, self.signin_cookie, nonce)
        return response

    async def submit(self, request: web.Request) -> web.Response:
        form = await request.post()
        token = form.get("token")
        token = token.strip() if isinstance(token, str) else ""
        if self.registry is None:
            return await self._open_session(request, token)
        try:
            caller = self.registry.authenticate(token)
            caller.require_scope(Scope.ADMIN)
        except (Unauthenticated, PermissionDenied) as exc:
            log.warning("console: sign-in refused: %s", exc)
            return await self.form(request, str(exc), 401 if isinstance(exc, Unauthenticated) else 403)
        return self._signed_in(request, caller, token)

    async def _open_session(self, request: web.Request, secret: str) -> web.Response:
        """Open mode: the one-time secret from the log signs in as anonymous, once."""
        assert self.open_secret is not None
        if not self.open_secret.redeem(secret):
            log.warning("console: sign-in refused: not the current one-time secret")
            return await self.form(request, _STALE_SECRET, 401)
        response = self._signed_in(request, ANONYMOUS, None)
        log.info("console: the next sign-in takes %s (this link signs in once)", self.signin_url())
        return response

    def _signed_in(self, request: web.Request, caller: Caller, token: str | None) -> web.Response:
        # A sign-in never keeps the session id the browser came with.
        self.sessions.close(request.cookies.get(self.session_cookie))
        session_id, _ = self.sessions.open(caller, token)
        log.info("console: %s signed in", caller.name)
        response = redirect("/overview")
        self._set_cookie(response, self.session_cookie, session_id)
        self._del_cookie(response, self.signin_cookie)
        return response

    async def signout(self, request: web.Request) -> web.Response:
        self.sessions.close(request.cookies.get(self.session_cookie))
        response = redirect("/signin")
        self._del_cookie(response, self.session_cookie)
        return response
