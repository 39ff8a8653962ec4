"""The edge's fixed HTTP front: the connection guard, `/healthz`, `/readyz`, then the routes, which SIGHUP swaps.

The listener and its connections belong to the front, which never changes;
the routes live in an aiohttp application of their own that a reload
replaces at once (inboxd_edge.reload). A request is handed to whichever
application is current when its headers are in; one already running
finishes on the application it began on.
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.http_parser import RawRequestMessage
from aiohttp.streams import StreamReader
from aiohttp.web_protocol import RequestHandler

from inboxd_edge import edge_metrics
from inboxd_edge.edge_limits import ConnectionGuard, GuardedServer
from inboxd_edge.health import Readiness
from inboxd_edge.ops_settings import LimitsSettings

log = logging.getLogger("inboxd_edge")

HEALTH_PATHS = ("/healthz", "/readyz")
LINGERING_SECONDS = 2.0


class Front:
    """Serves `/healthz` and `/readyz` itself and hands every other request to the current routes application."""

    def __init__(self, routes: web.AppRunner, readiness: Readiness, limits: LimitsSettings) -> None:
        self.routes = routes
        self.readiness = readiness
        self.guard = ConnectionGuard(limits, on_closed=edge_metrics.count_closed_early)
        self.server = _CountingServer(
            self._handle,
            request_factory=self._make_request,
            guard=self.guard,
            access_log=None,
            # What is left of a body the handler did not read (a 404, a 408) is read and dropped for at most
            # this long before the connection closes; aiohttp's default is 10 s.
            lingering_time=LINGERING_SECONDS,
        )

    async def swap(self, routes: web.AppRunner) -> None:
        """Makes `routes` current at once; the previous application is cleaned up (its requests run on)."""
        previous, self.routes = self.routes, routes
        await previous.cleanup()

    def _make_request(
        self,
        message: RawRequestMessage,
        payload: StreamReader,
        protocol: RequestHandler,
        writer: AbstractStreamWriter,
        task: asyncio.Task[None],
    ) -> web.BaseRequest:
        server = self.routes.server
        assert server is not None
        return server.request_factory(message, payload, protocol, writer, task)

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        if request.path in HEALTH_PATHS and request.method in ("GET", "HEAD"):
            return await self._health(request.path)
        server = self.routes.server
        assert server is not None
        try:
            return await server.request_handler(request)
        except web.HTTPException as exc:
            if isinstance(request, web.Request) and getattr(request.match_info, "http_exception", None) is not None:
                # aiohttp's own answer: no route for this path (404) or method (405). Counted under route "".
                edge_metrics.count_request("", exc.status, "no_route")
            raise

    async def _health(self, path: str) -> web.StreamResponse:
        if path == "/healthz":
            # The process serves: its event loop answered this.
            return web.json_response({"status": "serving"})
        if await self.readiness.ready():
            return web.json_response({"status": "ready"})
        return web.json_response({"status": "inboxd does not answer"}, status=503, headers={"Retry-After": "5"})


class _CountingServer(GuardedServer):
    """The guarded server, keeping the open-connections gauge current."""

    def connection_made(self, handler: RequestHandler, transport: asyncio.Transport) -> None:
        super().connection_made(handler, transport)
        edge_metrics.set_open_connections(self.guard.open_connections)

    def connection_lost(self, handler: RequestHandler, exc: BaseException | None = None) -> None:
        super().connection_lost(handler, exc)
        edge_metrics.set_open_connections(self.guard.open_connections)
