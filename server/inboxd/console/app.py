"""The console's HTTP side: routes, sign-in, CSRF checks, and start/stop beside the gRPC server.

aiohttp serves it on the server's own event loop, so the pages call the
same `Operators` use cases the admin RPCs call, with the same checks: the
admin scope, then each namespace against the token's grants.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import resources

from aiohttp import web

from inboxd.config.settings import ConfigError, Settings
from inboxd.config.tokens import Caller, TokenRegistry
from inboxd.console import security
from inboxd.console.pages import error_page, signin_page
from inboxd.console.views import Views
from inboxd.domain.errors import (
    InboxError,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    TransitionNotAllowed,
    Unauthenticated,
    Unavailable,
)
from inboxd.usecases.admin import Operators

log = logging.getLogger(__name__)

_STATUS = {
    InvalidArgument: 400,
    Unauthenticated: 401,
    PermissionDenied: 403,
    NotFound: 404,
    TransitionNotAllowed: 409,
    Unavailable: 503,
}
_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
_STATIC = {"console.css": "text/css", "console.js": "text/javascript"}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def html_response(body: str, status: int = 200) -> web.Response:
    return web.Response(text=body, status=status, content_type="text/html", charset="utf-8")


def redirect(location: str) -> web.Response:
    """303 See Other: after a POST, the browser GETs the next page."""
    return web.Response(status=303, headers={"Location": location})


class CsrfRefused(PermissionDenied):
    """A POST without its form's CSRF token: perhaps a forged form on another site."""


@dataclass(frozen=True)
class Session:
    """A signed-in operator: the token's caller and the CSRF token of its forms."""

    caller: Caller
    csrf: str


class Console:
    """The console's aiohttp application; `start` binds it, `stop` closes it."""

    def __init__(self, operators: Operators, registry: TokenRegistry | None, *, secure_cookies: bool) -> None:
        self.registry = registry
        self.secure_cookies = secure_cookies
        self.views = Views(operators, self)
        self.port: int | None = None
        self._runner: web.AppRunner | None = None
        folder = resources.files("inboxd.console").joinpath("static")
        self._static = {name: folder.joinpath(name).read_bytes() for name in _STATIC}

    def application(self) -> web.Application:
        app = web.Application(middlewares=[self._guard], client_max_size=1024 * 1024)
        v = self.views
        app.router.add_get("/", self._home)
        app.router.add_get("/signin", self._signin_form)
        app.router.add_post("/signin", self._signin)
        app.router.add_post("/signout", self._signout)
        app.router.add_get("/overview", v.overview)
        app.router.add_get("/overview/fragment", v.overview_fragment)
        app.router.add_get("/events", v.events)
        app.router.add_get("/event", v.event)
        app.router.add_get("/dead-letters", v.dead_letters)
        app.router.add_post("/replay", v.replay)
        app.router.add_get("/static/{name}", self._static_file)
        return app

    async def start(self, listen: str, ssl_context: ssl.SSLContext | None = None) -> int:
        host, _, port = listen.rpartition(":")
        # No access log: a request line names namespaces and event keys, which logs show only hashed.
        self._runner = web.AppRunner(self.application(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host.strip("[]") or None, int(port), ssl_context=ssl_context)
        await site.start()
        # (host, port) for IPv4, (host, port, flow, scope) for IPv6: the port is second either way.
        self.port = int(self._runner.addresses[0][1])
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def session(self, request: web.Request) -> Session:
        """The signed-in caller with the admin scope; raises Unauthenticated or PermissionDenied."""
        cookie = request.cookies.get(security.SESSION_COOKIE)
        caller = security.signed_in_caller(self.registry, cookie)
        assert cookie is not None
        return Session(caller, security.csrf_token(cookie))

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Security headers on every answer; CSRF on every POST; domain errors as pages."""
        try:
            if request.method == "POST":
                await self._check_csrf(request)
            response = await handler(request)
        except web.HTTPException as exc:  # aiohttp's own: no such route, a method not allowed
            exc.headers.update(_HEADERS)
            exc.headers["Cache-Control"] = "no-store"
            raise
        except Unauthenticated as exc:
            if request.method == "GET" and request.path != "/overview/fragment":
                response = redirect("/signin")
            else:
                response = html_response(error_page(401, f"{exc}: sign in again"), 401)
        except InboxError as exc:
            status = next((_STATUS[k] for k in type(exc).__mro__ if k in _STATUS), 500)
            response = html_response(error_page(status, str(exc), **self._signed_in_frame(request)), status)
        response.headers.update(_HEADERS)
        if "Cache-Control" not in response.headers:
            response.headers["Cache-Control"] = "no-store"
        return response

    def _signed_in_frame(self, request: web.Request) -> dict[str, str]:
        """An error page keeps the navigation when the visitor is signed in."""
        try:
            session = self.session(request)
        except InboxError:
            return {}
        return {"who": session.caller.name, "csrf": session.csrf}

    async def _check_csrf(self, request: web.Request) -> None:
        form = await request.post()
        presented = form.get(security.CSRF_FIELD)
        presented_text = presented if isinstance(presented, str) else None
        cookie_name = security.SIGNIN_COOKIE if request.path == "/signin" else security.SESSION_COOKIE
        if not security.csrf_matches(request.cookies.get(cookie_name), presented_text):
            log.warning("console: a POST to %s without a valid CSRF token was refused", request.path)
            raise CsrfRefused("This form's CSRF token is missing or wrong: reload the page and try again.")

    async def _home(self, request: web.Request) -> web.Response:
        return redirect("/overview")

    async def _signin_form(self, request: web.Request, error: str | None = None, status: int = 200) -> web.Response:
        nonce = request.cookies.get(security.SIGNIN_COOKIE) or security.new_nonce()
        page = signin_page(security.csrf_token(nonce), error=error, open_mode=self.registry is None)
        response = html_response(page, status)
        response.set_cookie(
            security.SIGNIN_COOKIE, nonce, httponly=True, samesite="Strict", secure=self.secure_cookies, path="/"
        )
        return response

    async def _signin(self, request: web.Request) -> web.Response:
        form = await request.post()
        token = form.get("token")
        token = token.strip() if isinstance(token, str) else ""
        value = security.open_session() if self.registry is None else token
        try:
            caller = security.signed_in_caller(self.registry, value)
        except (Unauthenticated, PermissionDenied) as exc:
            log.warning("console: sign-in refused: %s", exc)
            return await self._signin_form(request, str(exc), 401 if isinstance(exc, Unauthenticated) else 403)
        log.info("console: %s signed in", caller.name)
        response = redirect("/overview")
        response.set_cookie(
            security.SESSION_COOKIE, value, httponly=True, samesite="Strict", secure=self.secure_cookies, path="/"
        )
        response.del_cookie(security.SIGNIN_COOKIE, path="/")
        return response

    async def _signout(self, request: web.Request) -> web.Response:
        response = redirect("/signin")
        response.del_cookie(security.SESSION_COOKIE, path="/")
        return response

    async def _static_file(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in _STATIC:
            raise NotFound(f"no static file {name!r}")
        response = web.Response(body=self._static[name], content_type=_STATIC[name])
        response.headers["Cache-Control"] = "no-cache"
        return response


async def start_console(settings: Settings, operators: Operators, registry: TokenRegistry | None) -> Console | None:
    """Serves the console on INBOXD_CONSOLE_LISTEN; None when it is unset. Raises ConfigError when unsafe."""
    listen = settings.console_listen
    if not listen:
        return None
    tls = settings.tls_cert is not None and settings.tls_key is not None
    refusal = security.exposure_refusal(
        listen,
        tokens_file=registry is not None,
        tls=tls,
        trusted_network=settings.trusted_network,
    )
    if refusal is not None:
        raise ConfigError(refusal)
    context = None
    if tls:
        assert settings.tls_cert is not None and settings.tls_key is not None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            context.load_cert_chain(settings.tls_cert, settings.tls_key)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"the console cannot use INBOXD_TLS_CERT/INBOXD_TLS_KEY: {exc}") from None
    console = Console(operators, registry, secure_cookies=tls)
    try:
        port = await console.start(listen, context)
    except OSError as exc:
        raise ConfigError(f"INBOXD_CONSOLE_LISTEN={listen!r}: cannot listen: {exc.strerror or exc}") from None
    log.info("operators' console on %s://%s:%d/", "https" if tls else "http", listen.rpartition(":")[0], port)
    return console
