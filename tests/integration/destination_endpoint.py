"""A real aiohttp endpoint on 127.0.0.1 that verifies every delivery as a receiver would, and answers as told.

Each request is verified with the `standardwebhooks` library and with
`svix` (both unchanged) against the destination's secret, then answered by
the behaviour its path names: "ok" 200, "fail" 500, "busy" 429 with
Retry-After, "gone" 410, "slow" (never answers within a test's timeout),
"redirect" 302 to /ok. A test may swap a path's behaviour while it runs.
A signature that does not verify is answered 401 (an endpoint given no
secret, for the address tests, verifies nothing).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import standardwebhooks
import svix.webhooks
from aiohttp import web

from inboxd.store.database import Database

Behaviour = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    # Both libraries accepted the signature.
    verified: bool


async def _ok(request: web.Request) -> web.StreamResponse:
    return web.Response(status=200, text="thanks")


async def _fail(request: web.Request) -> web.StreamResponse:
    return web.Response(status=500, text="database is down")


async def _busy(request: web.Request) -> web.StreamResponse:
    return web.Response(status=429, text="slow down", headers={"Retry-After": "120"})


async def _gone(request: web.Request) -> web.StreamResponse:
    return web.Response(status=410, text="this hook was removed " + "x" * 3000)


async def _slow(request: web.Request) -> web.StreamResponse:
    await asyncio.sleep(30)
    return web.Response(status=200)


async def _redirect(request: web.Request) -> web.StreamResponse:
    return web.Response(status=302, headers={"Location": "/ok"})


@dataclass
class Endpoint:
    port: int = 0
    secret: str = ""
    behaviours: dict[str, Behaviour] = field(
        default_factory=lambda: {
            "ok": _ok, "fail": _fail, "busy": _busy, "gone": _gone, "slow": _slow, "redirect": _redirect,
        }
    )  # fmt: skip
    received: list[Received] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path}"

    def on(self, path: str) -> list[Received]:
        return [r for r in self.received if r.path == path]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {k.lower(): v for k, v in request.headers.items()}
        verified = False
        if self.secret:
            try:
                standardwebhooks.Webhook(self.secret).verify(body, headers, json_parse=False)
                svix.webhooks.Webhook(self.secret).verify(body, headers)
                verified = True
            except Exception:
                verified = False
        path = request.match_info["path"]
        self.received.append(Received(path, headers, body, verified))
        self.arrived.set()
        if self.secret and not verified:
            return web.Response(status=401, text="bad signature")
        return await self.behaviours.get(path, _ok)(request)

    async def wait_for(self, count: int, path: str | None = None, within: float = 10.0) -> list[Received]:
        async with asyncio.timeout(within):
            while len(got := (self.on(path) if path else self.received)) < count:
                self.arrived.clear()
                await self.arrived.wait()
        return got


@pytest.fixture
async def endpoint() -> AsyncIterator[Endpoint]:
    found = Endpoint()
    app = web.Application()
    app.router.add_post("/{path}", found.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    assert server is not None
    found.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
    try:
        yield found
    finally:
        await runner.cleanup()


@pytest.fixture(autouse=True)
async def destinations_removed(db: Database, ns: str) -> AsyncIterator[None]:
    """Deletes the test's destinations after it (in the modules that import this fixture).

    The database is shared by the whole run: a destination left behind would
    have every later server that delivers claim its namespace's leftovers.
    """
    yield

    async def work(conn: Any) -> None:
        await conn.execute("DELETE FROM inbox_destinations WHERE starts_with(namespace_pattern, %s)", (ns,))

    await db.run(work)
