"""The console answers only its own host names and its own pages' POSTs; open mode asks for its one-time secret."""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from inboxd.config.settings import Settings
from inboxd.config.tokens import TokenRegistry
from inboxd.console.pages import event_ref
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd_client.v1 import types_pb2
from tests.conftest import NO_RESCUER
from tests.console.rig import Rig, cookie_jar, http_sign_in, page_csrf, unique_tenants, write_tokens

_SIGNIN_LINK = re.compile(r"operators' console on (http://\S+/signin\?token=[A-Za-z0-9_-]+)")
_NEXT_LINK = re.compile(r"the next sign-in takes (http://\S+/signin\?token=[A-Za-z0-9_-]+)")


async def _status(base: str, path: str, host: str) -> int:
    async with (
        aiohttp.ClientSession() as http,
        http.get(base + path, headers={"Host": host}, allow_redirects=False) as a,
    ):
        return a.status


@pytest.mark.parametrize("path", ["/signin", "/overview", "/static/console.js", "/no-such-page"])
async def test_a_request_for_a_foreign_host_name_is_refused_before_anything_else(rig: Rig, path: str) -> None:
    port = rig.server.console_port
    assert port is not None
    for rebound in (
        "attacker.example",
        f"attacker.example:{port}",
        f"127.0.0.1.nip.io:{port}",
        f"localhost:{port + 1}",
    ):
        assert await _status(rig.base, path, rebound) == 421, rebound
    for own in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}"):
        assert await _status(rig.base, path, own) != 421, own


async def test_a_configured_host_name_is_answered(db: Database, tmp_path: Path) -> None:
    tokens = write_tokens(tmp_path / "tokens.toml", "shop")
    settings = Settings(
        listen="127.0.0.1:0",
        rescue_interval=NO_RESCUER,
        console_listen="127.0.0.1:0",
        console_hosts=("console.example.com", "ops.example.com:8443"),
        tokens_file=tokens.file,
    )
    running = await start_server(settings, db, registry=TokenRegistry(tokens.file))
    base = f"http://127.0.0.1:{running.console_port}"
    try:
        for host in ("console.example.com", f"console.example.com:{running.console_port}", "ops.example.com:8443"):
            assert await _status(base, "/signin", host) == 200, host
        for host in ("ops.example.com", "ops.example.com:8444", "evil.console.example.com"):
            assert await _status(base, "/signin", host) == 421, host
    finally:
        await running.stop(1.0)


async def test_a_post_from_another_origin_is_refused_even_with_the_right_csrf_token(rig: Rig) -> None:
    """A page on another port of this host shares our cookies, but not our origin."""
    ns = f"{rig.shop}/cross-origin"
    await rig.dead_letter(ns, "evt_1")
    async with aiohttp.ClientSession(cookie_jar=cookie_jar()) as http:
        await http_sign_in(http, rig.base, rig.tokens.operator)
        async with http.get(f"{rig.base}/dead-letters", params={"namespace": ns}) as listing:
            page = await listing.text()
        form = {
            "event": page.split('name="event" value="', 1)[1].split('"', 1)[0],
            "reason": "forged",
            "csrf": page_csrf(page),
        }
        other_port = f"http://127.0.0.1:{(rig.server.console_port or 0) + 1}"
        for headers in ({"Origin": other_port}, {"Origin": "null"}, {"Sec-Fetch-Site": "same-site"}):
            async with http.post(f"{rig.base}/replay", data=form, headers=headers, allow_redirects=False) as refused:
                assert refused.status == 403, headers
        assert (await rig.event(ns, "evt_1")).summary.state == types_pb2.EVENT_STATE_DEAD_LETTERED
        own = {"Origin": rig.base, "Sec-Fetch-Site": "same-origin"}
        async with http.post(f"{rig.base}/replay", data=form, headers=own) as replayed:
            assert replayed.status == 200
    assert (await rig.event(ns, "evt_1")).summary.state == types_pb2.EVENT_STATE_PENDING


@dataclass
class OpenConsole:
    server: RunningServer
    base: str
    caplog: pytest.LogCaptureFixture

    def link(self, pattern: re.Pattern[str] = _SIGNIN_LINK) -> str:
        # The first link is logged while the fixture starts the server, the next ones during the test.
        logged = "\n".join(r.getMessage() for when in ("setup", "call") for r in self.caplog.get_records(when))
        found = pattern.findall(logged)
        assert found, f"no sign-in link in the log: {logged}"
        link: str = found[-1]
        return link


@pytest.fixture
async def open_console(db: Database, caplog: pytest.LogCaptureFixture) -> AsyncIterator[OpenConsole]:
    """inboxd without a tokens file, its console on loopback."""
    caplog.set_level(logging.INFO)
    settings = Settings(rescue_interval=NO_RESCUER, listen="127.0.0.1:0", console_listen="127.0.0.1:0")
    running = await start_server(settings, db)
    yield OpenConsole(running, f"http://127.0.0.1:{running.console_port}", caplog)
    await running.stop(1.0)


async def test_open_mode_serves_no_page_without_the_one_time_secret(open_console: OpenConsole) -> None:
    base = open_console.base
    async with aiohttp.ClientSession(cookie_jar=cookie_jar()) as http:
        refused = await http_sign_in(http, base, "")
        assert refused.status == 401
        for path in ("/overview", "/events", "/dead-letters"):
            async with http.get(base + path, allow_redirects=False) as answer:
                assert (answer.status, answer.headers.get("Location")) == (303, "/signin"), path
        # A cookie of one's own choosing opens nothing either.
        chosen = {"inboxd_console_session": "open:mine", "inboxd_console": "open:mine"}
        async with http.get(f"{base}/overview", cookies=chosen, allow_redirects=False) as answer:
            assert answer.status == 303


async def test_open_mode_signs_in_once_with_the_link_in_the_log_and_logs_the_next(open_console: OpenConsole) -> None:
    base, link = open_console.base, open_console.link()
    assert link.startswith(base + "/signin?token=")
    async with aiohttp.ClientSession(cookie_jar=cookie_jar()) as http:
        async with http.get(link) as overview:
            assert overview.url.path == "/overview"
            assert "Signed in as <strong>anonymous</strong>" in await overview.text()
    async with aiohttp.ClientSession(cookie_jar=cookie_jar()) as again:
        async with again.get(link, allow_redirects=False) as reused:
            assert reused.status == 401, "a used sign-in link signed in again"
        secret = open_console.link(_NEXT_LINK).rpartition("=")[2]
        pasted = await http_sign_in(again, base, secret)  # the secret pasted in the form works too
        assert (pasted.status, pasted.headers["Location"]) == (303, "/overview")


async def test_open_mode_refuses_the_rebinding_replay_of_the_review(open_console: OpenConsole, rig: Rig) -> None:
    """The review's script: a foreign Host, a cookie of its choosing and the CSRF token derived from it."""
    ns = f"{unique_tenants()[0]}/rebound"
    await rig.dead_letter(ns, "evt_1")
    cookie = "open:chosen-by-the-attacker"
    derived = hmac.new(cookie.encode(), b"inboxd-console-csrf-v1", hashlib.sha256).hexdigest()
    reference = event_ref(ns, "evt_1")
    for host in ("rebind.attacker.example", f"127.0.0.1:{open_console.server.console_port}"):
        async with (
            aiohttp.ClientSession() as http,
            http.post(
                f"{open_console.base}/replay",
                data={"event": reference, "reason": "rebound", "csrf": derived},
                headers={"Host": host, "Cookie": f"inboxd_console={cookie}; inboxd_console_session={cookie}"},
                allow_redirects=False,
            ) as answer,
        ):
            assert answer.status in (401, 403, 421), (host, answer.status)
    assert (await rig.event(ns, "evt_1")).summary.state == types_pb2.EVENT_STATE_DEAD_LETTERED
