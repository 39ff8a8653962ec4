"""The console's sessions over HTTP, against a real inboxd and PostgreSQL: ids not tokens, expiry, revocation."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from inboxd.config.settings import Settings
from inboxd.config.tokens import TokenRegistry
from inboxd.console import Console
from inboxd.console.sessions import IDLE_SECONDS, MAX_AGE_SECONDS
from inboxd.serving.server import start_server
from inboxd.store.database import Database
from inboxd_client.v1 import admin_pb2, admin_pb2_grpc, types_pb2
from tests.conftest import NO_RESCUER
from tests.console.rig import Rig, cookie_jar, http_sign_in, page_csrf, start_tls_console, write_tokens


class ManualClock:
    """Seconds that move only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def _cookies(http: aiohttp.ClientSession) -> dict[str, str]:
    """Every cookie the console set, whatever it is named."""
    return {c.key: c.value for c in http.cookie_jar}


async def _signed_in_as(http: aiohttp.ClientSession, base: str, cookies: dict[str, str] | None = None) -> str | None:
    """Who the overview says is signed in, or None when it sends the visitor to sign in."""
    async with http.get(f"{base}/overview", cookies=cookies, allow_redirects=False) as answer:
        if answer.status == 303:
            assert answer.headers["Location"] == "/signin"
            return None
        assert answer.status == 200
        text = await answer.text()
        return text.split("Signed in as <strong>", 1)[1].split("</strong>", 1)[0]


async def test_the_cookie_holds_a_session_id_never_the_token(rig: Rig) -> None:
    async with aiohttp.ClientSession(cookie_jar=cookie_jar()) as http:
        signed_in = await http_sign_in(http, rig.base, rig.tokens.operator)
        assert signed_in.status == 303
        set_cookie = signed_in.headers.getall("Set-Cookie")
        assert not any(rig.tokens.operator in c for c in set_cookie), "the bearer token went into a cookie"
        assert all(rig.tokens.operator not in c.value for c in http.cookie_jar)
        assert await _signed_in_as(http, rig.base) == "ops-oncall"


async def test_signing_out_ends_the_session_for_every_copy_of_its_cookie(rig: Rig) -> None:
    async with aiohttp.ClientSession(cookie_jar=cookie_jar()) as http:
        await http_sign_in(http, rig.base, rig.tokens.operator)
        copied = _cookies(http)
        assert copied
        async with http.get(f"{rig.base}/overview") as overview:
            csrf = page_csrf(await overview.text())
        async with http.post(f"{rig.base}/signout", data={"csrf": csrf}, allow_redirects=False) as out:
            assert (out.status, out.headers["Location"]) == (303, "/signin")
    # Another client that kept the cookie (a browser that sent it to another port, a copy): refused.
    async with aiohttp.ClientSession(cookie_jar=cookie_jar()) as thief:
        assert await _signed_in_as(thief, rig.base, copied) is None


async def test_each_session_has_its_own_csrf_token(rig: Rig) -> None:
    ns = f"{rig.shop}/csrf-sessions"
    await rig.dead_letter(ns, "evt_1")
    pages = []
    async with (
        aiohttp.ClientSession(cookie_jar=cookie_jar()) as one,
        aiohttp.ClientSession(cookie_jar=cookie_jar()) as two,
    ):
        for http in (one, two):
            await http_sign_in(http, rig.base, rig.tokens.operator)
            async with http.get(f"{rig.base}/dead-letters", params={"namespace": ns}) as listing:
                pages.append(await listing.text())
        one_csrf, two_csrf = (page_csrf(p) for p in pages)
        assert one_csrf != two_csrf, "two sessions of one token share a CSRF token"
        ref = pages[0].split('name="event" value="', 1)[1].split('"', 1)[0]
        async with two.post(f"{rig.base}/replay", data={"event": ref, "reason": "r", "csrf": one_csrf}) as crossed:
            assert crossed.status == 403
    assert (await rig.event(ns, "evt_1")).summary.state == types_pb2.EVENT_STATE_DEAD_LETTERED


async def test_a_revoked_token_ends_its_sessions_for_good(rig: Rig) -> None:
    kept = rig.tokens.file.read_text()
    async with aiohttp.ClientSession(cookie_jar=cookie_jar()) as http:
        await http_sign_in(http, rig.base, rig.tokens.operator)
        assert await _signed_in_as(http, rig.base) == "ops-oncall"
        entries = kept.split("[[token]]")
        rig.tokens.file.write_text("[[token]]".join(e for e in entries if '"ops-oncall"' not in e))
        try:
            rig.registry.reload()  # what SIGHUP does
            assert await _signed_in_as(http, rig.base) is None
        finally:
            rig.tokens.file.write_text(kept)
            rig.registry.reload()
        # The token is back, but the session it had is over: sign in again.
        assert await _signed_in_as(http, rig.base) is None


@pytest.fixture
async def clocked_console(rig: Rig) -> AsyncIterator[tuple[Console, ManualClock]]:
    """A second console on the rig's use cases and tokens, whose sessions run on a hand-moved clock."""
    clock = ManualClock()
    assert rig.server.ops is not None
    console = Console(rig.server.ops.operators, rig.registry, https=False, clock=clock)
    await console.start("127.0.0.1:0")
    yield console, clock
    await console.stop()


async def test_a_session_ends_after_its_idle_timeout(clocked_console: tuple[Console, ManualClock], rig: Rig) -> None:
    console, clock = clocked_console
    base = f"http://127.0.0.1:{console.port}"
    async with aiohttp.ClientSession(cookie_jar=cookie_jar()) as http:
        await http_sign_in(http, base, rig.tokens.operator)
        clock.advance(IDLE_SECONDS - 60)
        assert await _signed_in_as(http, base) == "ops-oncall"
        # The overview's own refresh is no activity: it neither ends nor extends the session.
        clock.advance(IDLE_SECONDS - 60)
        async with http.get(f"{base}/overview/fragment") as fragment:
            assert fragment.status == 200
        clock.advance(60)
        async with http.get(f"{base}/overview/fragment") as fragment:
            assert fragment.status == 401
        assert await _signed_in_as(http, base) is None
    assert len(console.sessions) == 0


async def test_an_operation_pages_progress_poll_neither_ends_nor_extends_the_session(
    clocked_console: tuple[Console, ManualClock], rig: Rig
) -> None:
    console, clock = clocked_console
    base = f"http://127.0.0.1:{console.port}"
    started = await admin_pb2_grpc.InboxAdminServiceStub(rig.channel).StartBulkOperation(
        admin_pb2.StartBulkOperationRequest(
            filter=admin_pb2.BulkFilter(namespace_pattern=f"{rig.shop}/polled"), action=admin_pb2.BULK_ACTION_REPLAY,
            reason="a look", dry_run=True,
        ),
        metadata=[("authorization", f"Bearer {rig.tokens.root}")],
    )  # fmt: skip
    progress = f"{base}/bulk/operation.json?id={started.operation.id}"
    async with aiohttp.ClientSession(cookie_jar=cookie_jar()) as http:
        await http_sign_in(http, base, rig.tokens.operator)
        clock.advance(IDLE_SECONDS - 60)
        async with http.get(progress) as answer:
            assert answer.status == 200 and (await answer.json())["state"] == "DONE"
        clock.advance(60)
        async with http.get(progress) as answer:
            assert answer.status == 401  # the script says "Signed out", rather than following a redirect
        assert await _signed_in_as(http, base) is None


async def test_a_session_ends_at_its_absolute_expiry_however_busy(
    clocked_console: tuple[Console, ManualClock], rig: Rig
) -> None:
    console, clock = clocked_console
    base = f"http://127.0.0.1:{console.port}"
    async with aiohttp.ClientSession(cookie_jar=cookie_jar()) as http:
        await http_sign_in(http, base, rig.tokens.operator)
        step = IDLE_SECONDS / 2
        busy = 0.0
        while busy + step < MAX_AGE_SECONDS:
            clock.advance(step)
            busy += step
            assert await _signed_in_as(http, base) == "ops-oncall", f"ended after {busy:.0f} s"
        clock.advance(MAX_AGE_SECONDS - busy)
        assert await _signed_in_as(http, base) is None


async def test_under_tls_the_session_cookie_is_host_prefixed_secure_httponly_strict(
    db: Database, tmp_path: Path
) -> None:
    running, tokens, trust = await start_tls_console(db, tmp_path, "127.0.0.1:0")
    try:
        base = f"https://127.0.0.1:{running.console_port}"
        async with aiohttp.ClientSession(cookie_jar=cookie_jar(), connector=aiohttp.TCPConnector(ssl=trust)) as http:
            signed_in = await http_sign_in(http, base, tokens.operator)
            (cookie,) = [c for c in signed_in.headers.getall("Set-Cookie") if "session=" in c]
            assert cookie.startswith("__Host-inboxd_console_session="), cookie
            for flag in ("Secure", "HttpOnly", "SameSite=Strict", "Path=/"):
                assert flag in cookie, cookie
            assert "Domain" not in cookie
    finally:
        await running.stop(1.0)


async def test_behind_a_tls_proxy_the_cookies_are_secure_too(db: Database, tmp_path: Path) -> None:
    tokens = write_tokens(tmp_path / "tokens.toml", "shop")
    settings = Settings(
        listen="127.0.0.1:0",
        rescue_interval=NO_RESCUER,
        console_listen="127.0.0.1:0",
        console_https=True,
        tokens_file=tokens.file,
    )
    running = await start_server(settings, db, registry=TokenRegistry(tokens.file))
    try:
        async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{running.console_port}/signin") as form:
            cookie = form.headers["Set-Cookie"]
            assert cookie.startswith("__Host-inboxd_console_signin=") and "Secure" in cookie, cookie
    finally:
        await running.stop(1.0)
