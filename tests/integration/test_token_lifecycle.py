"""Tokens have a lifecycle: listed without secrets, revoked by name, refused past expires_at, counted before."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest

from inboxd.config.tokens import Scope, TokenRegistry, TokensFileError, entry_toml, load_tokens_file, new_token
from inboxd.domain.errors import Unauthenticated
from inboxd.serving.embedded_pg import free_port
from inboxd.serving.tokens_admin import listing, revoke
from inboxd_client.v1 import inbox_pb2_grpc
from tests.harness import serve_on_free_port
from tests.integration.helpers import accept_request, expect_status

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def inboxd(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INBOXD_")}
    return subprocess.run(
        [sys.executable, "-m", "inboxd", *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_a_token_past_its_expires_at_is_unauthenticated(tmp_path: Path) -> None:
    token = new_token()
    file = tmp_path / "tokens.toml"
    file.write_text(entry_toml("edge", token, [Scope.ACCEPT], ["*"], NOW + timedelta(hours=1)))
    registry = TokenRegistry(file)
    assert registry.authenticate(token, now=NOW).name == "edge"
    with pytest.raises(Unauthenticated, match=r"token 'edge' expired at 2026-12-07T13:00:00\+00:00"):
        registry.authenticate(token, now=NOW + timedelta(hours=1))


@pytest.mark.parametrize(
    ("written", "ok"),
    [("2027-01-31T00:00:00Z", True), ('"2027-01-31T00:00:00+01:00"', True), ("2027-01-31T00:00:00", False),
     ('"next tuesday"', False)],
)  # fmt: skip
def test_expires_at_is_an_rfc_3339_time_with_its_offset(tmp_path: Path, written: str, ok: bool) -> None:
    file = tmp_path / "tokens.toml"
    file.write_text(entry_toml("edge", new_token(), [Scope.ACCEPT], ["*"]) + f"expires_at = {written}\n")
    if ok:
        assert len(load_tokens_file(file)) == 1
    else:
        with pytest.raises(TokensFileError, match="'expires_at' must be an RFC 3339 time with its offset"):
            load_tokens_file(file)


def test_list_shows_names_scopes_namespaces_and_expiries_never_a_secret(tmp_path: Path) -> None:
    secret = new_token()
    file = tmp_path / "tokens.toml"
    file.write_text(
        entry_toml("edge-stripe", secret, [Scope.ACCEPT], ["stripe/*"], NOW + timedelta(days=3))
        + entry_toml("worker", new_token(), [Scope.WORK], ["*"], NOW - timedelta(days=1))
        + entry_toml("ops", new_token(), [Scope.ADMIN], ["*"])
    )
    shown = listing(file, now=NOW)
    assert shown.splitlines()[0].split() == ["NAME", "SCOPES", "NAMESPACES", "EXPIRES"]
    assert "edge-stripe  accept  stripe/*    2026-12-10T12:00:00Z (in 3d)" in shown
    assert "2026-12-06T12:00:00Z (expired)" in shown and "never" in shown
    assert secret not in shown and "sha256" not in shown
    assert TokenRegistry(file).tokens()[0].name == "edge-stripe"


def test_revoke_removes_one_entry_and_keeps_every_other_line(tmp_path: Path) -> None:
    file = tmp_path / "tokens.toml"
    kept = entry_toml("worker", new_token(), [Scope.WORK], ["*"])
    file.write_text(
        "# inboxd tokens: one entry per holder\n\n"
        + entry_toml("edge", new_token(), [Scope.ACCEPT], ["*"])
        + "\n"
        + kept
    )
    file.chmod(0o640)
    revoke(file, "edge")
    assert file.read_text() == "# inboxd tokens: one entry per holder\n\n" + kept
    assert file.stat().st_mode & 0o777 == 0o640
    with pytest.raises(TokensFileError, match=r"has no token named 'edge' \(it has: worker\)"):
        revoke(file, "edge")


def test_the_token_commands_from_the_command_line(tmp_path: Path) -> None:
    created = inboxd(
        "token", "create", "--name", "edge", "--scopes", "accept", "--namespaces", "*", "--expires-in", "90d"
    )
    assert created.returncode == 0, created.stderr
    assert "expires_at = " in created.stdout
    entry = created.stdout[created.stdout.index("[[token]]") :]
    file = tmp_path / "tokens.toml"
    file.write_text(entry)
    listed = inboxd("token", "list", "--tokens-file", str(file))
    assert listed.returncode == 0 and "edge" in listed.stdout and "(in 89d)" in listed.stdout, listed
    assert inboxd("token", "revoke", "--tokens-file", str(file), "edge").returncode == 0
    missing = inboxd("token", "revoke", "--tokens-file", str(file), "edge")
    assert missing.returncode == 2 and "has no token named 'edge'" in missing.stderr


async def test_a_running_server_refuses_expired_and_revoked_tokens_and_counts_the_expiring(
    database_url: str, tmp_path: Path
) -> None:
    soon, expired, revoked = new_token(), new_token(), new_token()
    file = tmp_path / "tokens.toml"
    now = datetime.now(UTC)
    file.write_text(
        entry_toml("soon", soon, [Scope.ACCEPT], ["*"], now + timedelta(days=2))
        + entry_toml("lapsed", expired, [Scope.ACCEPT], ["*"], now - timedelta(minutes=1))
        + entry_toml("gone", revoked, [Scope.ACCEPT], ["*"])
    )
    metrics = free_port()
    env = {"INBOXD_TOKENS_FILE": str(file), "INBOXD_METRICS_LISTEN": f"127.0.0.1:{metrics}"}
    proc, port = await asyncio.to_thread(serve_on_free_port, database_url, env, timeout=60)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = inbox_pb2_grpc.InboxServiceStub(channel)

            def bearer(token: str) -> tuple[tuple[str, str]]:
                return (("authorization", f"Bearer {token}"),)

            await stub.Accept(accept_request("tokens/life", "a"), metadata=bearer(soon))
            error = await expect_status(
                stub.Accept(accept_request("tokens/life", "b"), metadata=bearer(expired)),
                grpc.StatusCode.UNAUTHENTICATED,
            )
            assert "token 'lapsed' expired at" in (error.details() or "")
            page = await asyncio.to_thread(
                lambda: urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=10).read().decode()
            )
            assert "inboxd_tokens_expiring_soon 1.0" in page and "inboxd_tokens_expired 1.0" in page
            await stub.Accept(accept_request("tokens/life", "c"), metadata=bearer(revoked))
            revoke(file, "gone")
            proc.send_signal(signal.SIGHUP)
            for _ in range(100):  # the reload is asynchronous to us; bounded
                try:
                    await stub.Accept(accept_request("tokens/life", "d"), metadata=bearer(revoked))
                except grpc.aio.AioRpcError as exc:
                    assert exc.code() == grpc.StatusCode.UNAUTHENTICATED
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("a revoked token still works after SIGHUP")
    finally:
        proc.kill()
        proc.wait()
