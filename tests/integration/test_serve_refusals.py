"""`inboxd serve` refuses settings that would expose bearer tokens or shrink the dedupe window, unless told."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from inboxd.config.tokens import Scope, entry_toml, new_token
from inboxd.serving.pgpass import read_entries
from tests.integration.procs import Serve, embedded_env


def tokens_file(folder: Path) -> Path:
    path = folder / "tokens.toml"
    path.write_text(entry_toml("edge", new_token(), [Scope.ACCEPT], ["*"]))
    return path


def serve_exits(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "inboxd", "serve"], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_tokens_in_plaintext_beyond_loopback_are_refused_at_start_up(migrated_url: str, tmp_path: Path) -> None:
    env = embedded_env(
        tmp_path, DATABASE_URL=migrated_url, INBOXD_LISTEN="0.0.0.0:0", INBOXD_TOKENS_FILE=str(tokens_file(tmp_path))
    )
    done = serve_exits(env)
    assert done.returncode != 0
    assert "refusing to listen on 0.0.0.0:0 without TLS: bearer tokens would cross the network in plaintext" in (
        done.stderr
    )


async def test_a_trusted_network_serves_tokens_in_plaintext_and_says_so_loudly(
    migrated_url: str, tmp_path: Path
) -> None:
    env = embedded_env(
        tmp_path,
        DATABASE_URL=migrated_url,
        INBOXD_LISTEN="0.0.0.0:0",
        INBOXD_TOKENS_FILE=str(tokens_file(tmp_path)),
        INBOXD_TRUSTED_NETWORK="1",
    )
    serve = Serve(env, tmp_path / "inboxd.log", cwd=tmp_path)
    try:
        await asyncio.to_thread(serve.start)
        assert serve.host == "0.0.0.0"
        assert '"level": "warning"' in serve.log_tail()
        assert "INBOXD_TRUSTED_NETWORK is set: bearer tokens cross the network" in serve.log_tail()
        assert await asyncio.to_thread(serve.terminate) == 0
    finally:
        serve.kill()


async def test_a_retention_of_zero_is_refused_at_start_up_unless_forced_and_then_said_loudly(
    migrated_url: str, tmp_path: Path
) -> None:
    env = embedded_env(tmp_path, DATABASE_URL=migrated_url, INBOXD_RETENTION="0")
    done = serve_exits(env)
    assert done.returncode == 2
    assert "INBOXD_RETENTION=0 is under the floor of 1h" in done.stderr

    serve = Serve({**env, "INBOXD_RETENTION_FORCE": "1"}, tmp_path / "inboxd.log", cwd=tmp_path)
    try:
        await asyncio.to_thread(serve.start)
        assert "INBOXD_RETENTION=0 is under the floor of 1h, forced by INBOXD_RETENTION_FORCE" in serve.log_tail()
        assert await asyncio.to_thread(serve.terminate) == 0
    finally:
        serve.kill()


def test_metrics_beyond_loopback_are_refused_at_start_up(migrated_url: str, tmp_path: Path) -> None:
    env = embedded_env(tmp_path, DATABASE_URL=migrated_url, INBOXD_METRICS_LISTEN="0.0.0.0:0")
    done = serve_exits(env)
    assert done.returncode != 0
    assert "refusing to serve /metrics on 0.0.0.0:0: it has no authentication" in done.stderr
    assert "INBOXD_METRICS_BEYOND_LOOPBACK=1" in done.stderr


async def test_metrics_beyond_loopback_serve_when_the_operator_says_so_and_say_so_loudly(
    migrated_url: str, tmp_path: Path
) -> None:
    env = embedded_env(
        tmp_path, DATABASE_URL=migrated_url, INBOXD_METRICS_LISTEN="0.0.0.0:0", INBOXD_METRICS_BEYOND_LOOPBACK="1"
    )
    serve = Serve(env, tmp_path / "inboxd.log", cwd=tmp_path)
    try:
        await asyncio.to_thread(serve.start)
        assert "INBOXD_METRICS_BEYOND_LOOPBACK is set: /metrics on 0.0.0.0:0 answers anyone" in serve.log_tail()
        assert await asyncio.to_thread(serve.terminate) == 0
    finally:
        serve.kill()


def test_a_production_shaped_server_without_database_url_refuses_to_start(tmp_path: Path) -> None:
    """A lost DATABASE_URL must not become a fresh embedded database behind a tokens file."""
    env = embedded_env(tmp_path, INBOXD_TOKENS_FILE=str(tokens_file(tmp_path)))
    done = serve_exits(env)
    assert done.returncode == 2, done.stderr
    assert "inboxd: DATABASE_URL is not set, and this server is configured for production: a tokens file" in done.stderr
    assert "INBOXD_EMBEDDED=1" in done.stderr
    assert not (tmp_path / "postgres").exists(), "no cluster was made"


def test_a_misspelt_database_url_is_named_in_the_refusal(migrated_url: str, tmp_path: Path) -> None:
    env = embedded_env(
        tmp_path, DATABSE_URL=migrated_url, INBOXD_LISTEN="0.0.0.0:0", INBOXD_TOKENS_FILE=str(tokens_file(tmp_path))
    )
    env["INBOXD_TRUSTED_NETWORK"] = "1"
    done = serve_exits(env)
    assert done.returncode == 2, done.stderr
    assert "(DATABSE_URL is set: a misspelt DATABASE_URL?)" in done.stderr
    assert "a listen address beyond loopback (INBOXD_LISTEN=0.0.0.0:0)" in done.stderr


async def test_every_start_says_which_database_it_uses_without_its_password(migrated_url: str, tmp_path: Path) -> None:
    parts = conninfo_to_dict(migrated_url)
    secret = read_entries(Path(str(parts.pop("passfile"))))[str(parts["user"])]
    url = make_conninfo("", **{**parts, "password": secret})  # the password in the URL itself, as many write it
    serve = Serve(embedded_env(tmp_path, DATABASE_URL=url), tmp_path / "inboxd.log", cwd=tmp_path)
    await asyncio.to_thread(serve.start)
    try:
        said = serve.log_tail(200)
        assert "database: host=" in said and "port=" in said and "dbname=" in said, said
        assert secret not in said
        assert await asyncio.to_thread(serve.terminate) == 0
    finally:
        serve.kill()
