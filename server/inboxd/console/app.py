"""The console's HTTP side: routes, sessions, Host, Origin and CSRF checks, and start/stop beside the gRPC server.

aiohttp serves it on the server's own event loop, so the pages call the
same `Operators` use cases the admin RPCs call, with the same checks: the
admin scope, then each namespace against the token's grants.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Sequence
from importlib import resources
from urllib.parse import urlencode

from aiohttp import web

from inboxd.config.settings import ConfigError, Settings
from inboxd.config.tokens import Scope, TokenRegistry
from inboxd.console import security
from inboxd.console.bulk_forms import BulkForms
from inboxd.console.destinations_page import DestinationsForms
from inboxd.console.flow_forms import FlowForms
from inboxd.console.hosts import AllowedHosts
from inboxd.console.html import error_status, html_response, redirect
from inboxd.console.operator_forms import OperatorForms
from inboxd.console.pages import error_page
from inboxd.console.sessions import Clock, Session, Sessions
from inboxd.console.signin import SignIn
from inboxd.console.subscriptions_page import SubscriptionForms
from inboxd.console.views import Views
from inboxd.domain.errors import InboxError, NotFound, PermissionDenied, Unauthenticated
from inboxd.usecases.admin import Operators

log = logging.getLogger(__name__)

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
# What a page's script fetches by itself: not the operator's activity (a forgotten tab still goes
# idle), and a signed-out fetch answers 401 rather than the sign-in page.
_POLLED = frozenset({"/overview/fragment", "/bulk/operation.json"})
# Where a request keeps its session once looked up (the CSRF check, then the page).
_SESSION_KEY = web.RequestKey("inboxd.console.session", Session)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class CsrfRefused(PermissionDenied):
    """A POST without its form's CSRF token, or from another site's page: perhaps a forged form."""


class Console:
    """The console's aiohttp application; `start` binds it, `stop` closes it.

    `https`: browsers reach it over https (its own TLS, or a proxy's), so its
    cookies are Secure and __Host- prefixed. `hosts`: Host names it answers
    besides loopback's and its listen address's. `clock`: the sessions' time.
    """

    def __init__(
        self,
        operators: Operators,
        registry: TokenRegistry | None,
        *,
        https: bool,
        hosts: Sequence[str] = (),
        clock: Clock = time.monotonic,
    ) -> None:
        self.registry = registry
        self.https = https
        self.extra_hosts = tuple(hosts)
        self.sessions = Sessions(clock)
        self.key = security.InstanceKey()
        # Open mode (no tokens file): only whoever reads the log may sign in.
        self.open_secret = security.OpenSecret() if registry is None else None
        self.session_cookie = security.cookie_name(security.SESSION_COOKIE, secure=https)
        self.signin_cookie = security.cookie_name(security.SIGNIN_COOKIE, secure=https)
        self.views = Views(operators, self.session)
        self.acts = OperatorForms(operators, self.session)
        self.flow = FlowForms(operators, self.session)
        self.destinations = DestinationsForms(operators, self.session)
        self.bulk = BulkForms(operators, self.session)
        self.subscriptions = SubscriptionForms(operators, self.session)
        self.signin = SignIn(
            registry=registry,
            sessions=self.sessions,
            key=self.key,
            open_secret=self.open_secret,
            https=https,
            session_cookie=self.session_cookie,
            signin_cookie=self.signin_cookie,
            signin_url=self.signin_url,
        )
        self.port: int | None = None
        self.hosts: AllowedHosts | None = None
        self._listen_host = "127.0.0.1"
        self._tls = False
        self._host_warned = -60.0
        self._runner: web.AppRunner | None = None
        folder = resources.files("inboxd.console").joinpath("static")
        self._static = {name: folder.joinpath(name).read_bytes() for name in _STATIC}

    def application(self) -> web.Application:
        app = web.Application(middlewares=[self._guard], client_max_size=1024 * 1024)
        v = self.views
        app.router.add_get("/", self._home)
        app.router.add_get("/signin", self.signin.page)
        app.router.add_post("/signin", self.signin.submit)
        app.router.add_post("/signout", self.signin.signout)
        app.router.add_get("/overview", v.overview)
        app.router.add_get("/overview/fragment", v.overview_fragment)
        app.router.add_get("/events", v.events)
        app.router.add_get("/event", v.event)
        app.router.add_get("/dead-letters", v.dead_letters)
        app.router.add_get("/unresolved", v.unresolved)
        app.router.add_get("/trends", v.trends)
        app.router.add_post("/replay", v.replay)
        app.router.add_post("/settle", self.acts.settle)
        app.router.add_post("/end-claim", self.acts.end_claim)
        app.router.add_post("/discard", self.acts.discard)
        app.router.add_get("/flow", self.flow.page)
        app.router.add_post("/flow/pause", self.flow.pause)
        app.router.add_post("/flow/resume", self.flow.resume)
        app.router.add_post("/flow/set", self.flow.set_rule)
        app.router.add_post("/flow/remove", self.flow.remove)
        app.router.add_get("/bulk", self.bulk.page)
        app.router.add_post("/bulk/preview", self.bulk.preview)
        app.router.add_post("/bulk/start", self.bulk.start)
        app.router.add_get("/bulk/operation", self.bulk.operation)
        app.router.add_get("/bulk/operation.json", self.bulk.operation_json)
        app.router.add_post("/bulk/cancel", self.bulk.cancel)
        app.router.add_get("/subscriptions", self.subscriptions.page)
        app.router.add_post("/subscriptions/create", self.subscriptions.create)
        app.router.add_post("/subscriptions/delete", self.subscriptions.delete)

        app.router.add_get("/destinations", self.destinations.page)
        app.router.add_post("/destinations/resume", self.destinations.resume)
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
        self._listen_host = host.strip("[]") or "127.0.0.1"
        self._tls = ssl_context is not None
        self.hosts = AllowedHosts(host.strip("[]"), self.port, self.extra_hosts, https=self.https)
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def signin_url(self) -> str | None:
        """Open mode's sign-in link, with the current one-time secret; None with a tokens file."""
        if self.open_secret is None or self.port is None:
            return None
        host = f"[{self._listen_host}]" if ":" in self._listen_host else self._listen_host
        # The console's own address (a proxy in front has its own): https only when it speaks TLS itself.
        scheme = "https" if self._tls else "http"
        query = urlencode({security.SECRET_PARAMETER: self.open_secret.value})
        return f"{scheme}://{host}:{self.port}/signin?{query}"

    def session(self, request: web.Request) -> Session:
        """The live session, its token still holding the admin scope; raises Unauthenticated."""
        found: Session | None = request.get(_SESSION_KEY)
        if found is not None:
            return found
        session_id = request.cookies.get(self.session_cookie)
        session = self.sessions.find(session_id, touch=request.path not in _POLLED)
        if session is None:
            raise Unauthenticated("not signed in, or the session ended")
        if self.registry is not None:
            try:
                caller = self.registry.authenticate(session.token)
                caller.require_scope(Scope.ADMIN)
            except (Unauthenticated, PermissionDenied):
                # Revoked by SIGHUP (or its admin scope taken away): the session ends with it.
                self.sessions.close(session_id)
                raise Unauthenticated("the token this session signed in with is no longer valid") from None
            session.caller = caller  # grants as the tokens file says now
        request[_SESSION_KEY] = session
        return session

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """The Host first; then security headers on every answer, Origin and CSRF on every POST."""
        if self.hosts is None or not self.hosts.allows(request.headers.get("Host")):
            self._warn_foreign_host()
            return _secured(html_response(error_page(421, "This console does not answer for that host name."), 421))
        response: web.StreamResponse
        try:
            if request.method == "POST":
                await self._check_post(request, self.hosts)
            response = await handler(request)
        except web.HTTPException as exc:  # aiohttp's own: no such route, a method not allowed
            exc.headers.update(_HEADERS)
            exc.headers["Cache-Control"] = "no-store"
            raise
        except Unauthenticated as exc:
            if (request.method == "GET" and request.path not in _POLLED) or request.path == "/signout":
                response = redirect("/signin")
            else:
                response = html_response(error_page(401, f"{exc}: sign in again"), 401)
        except InboxError as exc:
            status = error_status(exc)
            response = html_response(error_page(status, str(exc), **self._signed_in_frame(request)), status)
        return _secured(response)

    def _warn_foreign_host(self) -> None:
        # At most once a minute: a page that rebinds its name to us may ask many times.
        now = time.monotonic()
        if now - self._host_warned >= 60.0:
            self._host_warned = now
            log.warning("console: requests for a host name it does not answer were refused (421): DNS rebinding?")

    def _signed_in_frame(self, request: web.Request) -> dict[str, str]:
        """An error page keeps the navigation when the visitor is signed in."""
        try:
            session = self.session(request)
        except InboxError:
            return {}
        return {"who": session.caller.name, "csrf": session.csrf}

    async def _check_post(self, request: web.Request, hosts: AllowedHosts) -> None:
        refusal = hosts.cross_site_refusal(request.headers.get("Origin"), request.headers.get("Sec-Fetch-Site"))
        if refusal is not None:
            log.warning("console: %s to %s was refused", refusal, request.path)
            raise CsrfRefused(f"Refused {refusal}: use the console's own pages.")
        form = await request.post()
        presented = form.get(security.CSRF_FIELD)
        presented_text = presented if isinstance(presented, str) else None
        if request.path == "/signin":
            valid = self.key.signin_csrf_matches(request.cookies.get(self.signin_cookie), presented_text)
        else:
            valid = self.session(request).csrf_matches(presented_text)
        if not valid:
            log.warning("console: a POST to %s without a valid CSRF token was refused", request.path)
            raise CsrfRefused("This form's CSRF token is missing or wrong: reload the page and try again.")

    async def _home(self, request: web.Request) -> web.Response:
        return redirect("/overview")

    async def _static_file(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in _STATIC:
            raise NotFound(f"no static file {name!r}")
        response = web.Response(body=self._static[name], content_type=_STATIC[name])
        response.headers["Cache-Control"] = "no-cache"
        return response


def _secured(response: web.StreamResponse) -> web.StreamResponse:
    response.headers.update(_HEADERS)
    if "Cache-Control" not in response.headers:
        response.headers["Cache-Control"] = "no-store"
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
    console = Console(operators, registry, https=tls or settings.console_https, hosts=settings.console_hosts)
    try:
        port = await console.start(listen, context)
    except OSError as exc:
        raise ConfigError(f"INBOXD_CONSOLE_LISTEN={listen!r}: cannot listen: {exc.strerror or exc}") from None
    url = console.signin_url()
    if url is None:
        log.info("operators' console on %s://%s:%d/", "https" if tls else "http", listen.rpartition(":")[0], port)
    else:
        log.info("operators' console on %s (no tokens file: this link signs in once)", url)
    return console
