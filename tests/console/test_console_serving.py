"""The console as served: refused where it would leak, over TLS where asked, its headers, no secret in logs."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from inboxd.config.settings import ConfigError, Settings
from inboxd.config.tokens import TokenRegistry
from inboxd.serving.server import start_server
from inboxd.store.database import Database
from tests.conftest import NO_RESCUER
from tests.console.rig import Rig, cookie_jar, http_sign_in, start_tls_console, write_tokens
from tests.harness import serve_on_free_port


async def test_the_console_refuses_to_listen_beyond_loopback_without_tokens_before_anything_serves(
    db: Database,
) -> None:
    settings = Settings(rescue_interval=NO_RESCUER, listen="127.0.0.1:0", console_listen="0.0.0.0:0")
    with pytest.raises(ConfigError, match="without a tokens file"):
        await start_server(settings, db)


async def test_the_console_refuses_plaintext_beyond_loopback(db: Database, tmp_path: Path) -> None:
    tokens = write_tokens(tmp_path / "tokens.toml", "shop")
    settings = Settings(
        rescue_interval=NO_RESCUER, listen="127.0.0.1:0", console_listen="0.0.0.0:0", tokens_file=tokens.file
    )
    with pytest.raises(ConfigError, match="INBOXD_TRUSTED_NETWORK"):
        await start_server(settings, db, registry=TokenRegistry(tokens.file))


async def test_the_console_serves_tls_beyond_loopback_with_secure_cookies(db: Database, tmp_path: Path) -> None:
    running, _, trust = await start_tls_console(db, tmp_path, "0.0.0.0:0")
    try:
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
            async with http.get(f"https://127.0.0.1:{running.console_port}/signin", ssl=trust) as answer:
                assert answer.status == 200
                assert "Secure" in answer.headers["Set-Cookie"]
                assert "HttpOnly" in answer.headers["Set-Cookie"]
            with pytest.raises(aiohttp.ClientError):
                await http.get(f"http://127.0.0.1:{running.console_port}/signin")
    finally:
        await running.stop(1.0)


async def test_every_answer_carries_the_security_headers(rig: Rig) -> None:
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        for path in ("/signin", "/overview", "/static/console.js", "/no-such-page"):
            async with http.get(rig.base + path, allow_redirects=False) as answer:
                csp = answer.headers.get("Content-Security-Policy", "")
                assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp, path
                assert answer.headers.get("X-Content-Type-Options") == "nosniff", path
                assert "no-" in answer.headers.get("Cache-Control", ""), path


async def test_a_sign_in_without_its_csrf_token_is_refused(rig: Rig) -> None:
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        async with http.post(f"{rig.base}/signin", data={"token": rig.tokens.operator}, allow_redirects=False) as bad:
            assert bad.status == 403
            assert "inboxd_console_session=" not in bad.headers.get("Set-Cookie", "")


async def test_the_payload_and_the_token_never_reach_the_logs(rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    ns = f"{rig.shop}/logs"
    await rig.accept(ns, "evt_private", payload={"ssn": "078-05-1120"})
    caplog.set_level(logging.DEBUG)
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        await http_sign_in(http, rig.base, rig.tokens.operator)
        async with http.get(f"{rig.base}/event", params={"namespace": ns, "key": "evt_private", "payload": "1"}) as ok:
            assert "078-05-1120" in await ok.text()
    assert "078-05-1120" not in caplog.text
    assert rig.tokens.operator not in caplog.text
    assert "evt_private" not in caplog.text


async def test_inboxd_serve_refuses_a_console_beyond_loopback_without_tokens(migrated_url: str) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("INBOXD_")}
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "inboxd", "serve", "--listen", "127.0.0.1:0", "--console-listen", "0.0.0.0:0"],
        env={**clean, "DATABASE_URL": migrated_url},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "refusing to serve the console on 0.0.0.0:0 without a tokens file" in done.stderr


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.mark.parametrize("workers", ["1", "2"])
async def test_inboxd_serve_serves_the_console_on_console_listen(
    migrated_url: str, workers: str, tmp_path: Path
) -> None:
    """Under --workers 2 the parent serves it, once: a child binding it too would fail to start.

    Without a tokens file its log names the one-time sign-in link, which signs in.
    """
    port = _free_port()
    env = {"INBOXD_CONSOLE_LISTEN": f"127.0.0.1:{port}", "INBOXD_WORKERS": workers, "INBOXD_RESCUE_INTERVAL": "0"}
    stderr = tmp_path / "stderr.log"
    proc, _ = await asyncio.to_thread(serve_on_free_port, migrated_url, env, timeout=30.0, stderr_log=stderr)
    try:
        async with aiohttp.ClientSession(cookie_jar=cookie_jar()) as http:
            async with http.get(f"http://127.0.0.1:{port}/signin") as answer:
                assert answer.status == 200
                assert "Sign in" in await answer.text()
            links = re.findall(rf"http://127\.0\.0\.1:{port}/signin\?token=[A-Za-z0-9_-]+", stderr.read_text())
            assert len(links) == 1, stderr.read_text()
            async with http.get(links[0]) as signed_in:
                assert "Signed in as <strong>anonymous</strong>" in await signed_in.text()
    finally:
        proc.terminate()
        assert await asyncio.to_thread(proc.wait, 30) == 0
