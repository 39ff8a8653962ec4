"""Signing in and out of the console: the sign-in form, a token or open mode's one-time secret, Sign out.

A sign-in opens a session (`console.sessions`) and sets only its random id
as the cookie; Sign out ends the session here, not just the browser's copy.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from aiohttp import web

from inboxd.config.tokens import ANONYMOUS, Caller, Scope
from inboxd.console import security
from inboxd.console.html import html_response, redirect
from inboxd.console.pages import signin_page
from inboxd.domain.errors import PermissionDenied, Unauthenticated

if TYPE_CHECKING:
    from inboxd.console.app import Console

log = logging.getLogger(__name__)

_STALE_SECRET = (
    "That is not the current sign-in secret: each one signs in once. "
    "The server's log names the link for the next sign-in."
)


class SignIn:
    """The routes /signin (GET and POST) and /signout of one console."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def _set_cookie(self, response: web.Response, name: str, value: str) -> None:
        response.set_cookie(name, value, httponly=True, samesite="Strict", secure=self.console.https, path="/")

    def _del_cookie(self, response: web.Response, name: str) -> None:
        # A browser ignores the deletion of a __Host- cookie that is not Secure itself.
        response.del_cookie(name, path="/", secure=self.console.https, httponly=True, samesite="Strict")

    async def page(self, request: web.Request) -> web.Response:
        """GET /signin: the form; in open mode, with ?token=<the secret from the log>, the sign-in itself."""
        secret = request.query.get(security.SECRET_PARAMETER)
        if self.console.open_secret is not None and secret is not None:
            return await self._open_session(request, secret)
        return await self.form(request)

    async def form(self, request: web.Request, error: str | None = None, status: int = 200) -> web.Response:
        nonce = request.cookies.get(self.console.signin_cookie) or security.new_nonce()
        page = signin_page(self.console.key.signin_csrf(nonce), error=error, open_mode=self.console.registry is None)
        response = html_response(page, status)
        self._set_cookie(response, self.console.signin_cookie, nonce)
        return response

    async def submit(self, request: web.Request) -> web.Response:
        form = await request.post()
        token = form.get("token")
        token = token.strip() if isinstance(token, str) else ""
        if self.console.registry is None:
            return await self._open_session(request, token)
        try:
            caller = self.console.registry.authenticate(token)
            caller.require_scope(Scope.ADMIN)
        except (Unauthenticated, PermissionDenied) as exc:
            log.warning("console: sign-in refused: %s", exc)
            return await self.form(request, str(exc), 401 if isinstance(exc, Unauthenticated) else 403)
        return self._signed_in(request, caller, token)

    async def _open_session(self, request: web.Request, secret: str) -> web.Response:
        """Open mode: the one-time secret from the log signs in as anonymous, once."""
        assert self.console.open_secret is not None
        if not self.console.open_secret.redeem(secret):
            log.warning("console: sign-in refused: not the current one-time secret")
            return await self.form(request, _STALE_SECRET, 401)
        response = self._signed_in(request, ANONYMOUS, None)
        log.info("console: the next sign-in takes %s (this link signs in once)", self.console.signin_url())
        return response

    def _signed_in(self, request: web.Request, caller: Caller, token: str | None) -> web.Response:
        # A sign-in never keeps the session id the browser came with.
        self.console.sessions.close(request.cookies.get(self.console.session_cookie))
        session_id, _ = self.console.sessions.open(caller, token)
        log.info("console: %s signed in", caller.name)
        response = redirect("/overview")
        self._set_cookie(response, self.console.session_cookie, session_id)
        self._del_cookie(response, self.console.signin_cookie)
        return response

    async def signout(self, request: web.Request) -> web.Response:
        self.console.sessions.close(request.cookies.get(self.console.session_cookie))
        response = redirect("/signin")
        self._del_cookie(response, self.console.session_cookie)
        return response
