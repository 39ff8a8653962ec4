"""A renewed TLS certificate is served after SIGHUP, without a restart; a bad one is refused and the old one stays."""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from inboxd.config.settings import ConfigError, Settings
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from tests.integration.certs import Certs, make_certs
from tests.integration.procs import Serve, embedded_env, poll

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")


@pytest.fixture(scope="module")
def old_and_new(tmp_path_factory: pytest.TempPathFactory) -> tuple[Certs, Certs]:
    """Two certificates for 127.0.0.1, each from a CA of its own: today's and its renewal."""
    return make_certs(tmp_path_factory.mktemp("old")), make_certs(tmp_path_factory.mktemp("new"))


def install(certs: Certs, folder: Path) -> tuple[Path, Path]:
    """Puts `certs`' server certificate and key where the server's settings point, as a renewal does."""
    folder.mkdir(exist_ok=True)
    cert, key = folder / "tls.crt", folder / "tls.key"
    shutil.copyfile(certs.server_cert, cert)
    shutil.copyfile(certs.server_key, key)
    return cert, key


async def serving(port: int, ca: Path) -> bool:
    """Whether a new connection that trusts only `ca` gets a health answer."""
    credentials = grpc.ssl_channel_credentials(root_certificates=await asyncio.to_thread(ca.read_bytes))
    # A connection of its own: channels may otherwise share one made before the reload.
    options = [("grpc.use_local_subchannel_pool", 1)]
    async with grpc.aio.secure_channel(f"127.0.0.1:{port}", credentials, options=options) as channel:
        try:
            await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        except grpc.aio.AioRpcError as exc:
            assert exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED), exc
            return False
    return True


@pytest.fixture
async def tls_server(
    settings: Settings, db: Database, old_and_new: tuple[Certs, Certs], tmp_path: Path
) -> AsyncIterator[RunningServer]:
    cert, key = install(old_and_new[0], tmp_path / "tls")
    running = await start_server(replace(settings, tls_cert=cert, tls_key=key), db)
    yield running
    await running.stop(1.0)


async def test_reload_serves_the_renewed_certificate_to_new_connections(
    tls_server: RunningServer, old_and_new: tuple[Certs, Certs], tmp_path: Path
) -> None:
    old, new = old_and_new
    assert await serving(tls_server.port, old.ca)
    install(new, tmp_path / "tls")
    assert not await serving(tls_server.port, new.ca), "files change nothing before the reload"
    assert tls_server.certificates is not None
    tls_server.certificates.reload()
    assert await serving(tls_server.port, new.ca)
    assert not await serving(tls_server.port, old.ca)


async def test_a_key_that_is_not_the_certificates_is_refused_and_the_old_pair_stays(
    tls_server: RunningServer, old_and_new: tuple[Certs, Certs], tmp_path: Path
) -> None:
    old, new = old_and_new
    shutil.copyfile(new.server_cert, tmp_path / "tls" / "tls.crt")  # the new certificate, the old key
    assert tls_server.certificates is not None
    with pytest.raises(ConfigError, match="are not a certificate and its key"):
        tls_server.certificates.reload()
    assert await serving(tls_server.port, old.ca)


async def test_sighup_reloads_the_certificate_of_a_running_inboxd_serve(
    migrated_url: str, old_and_new: tuple[Certs, Certs], tmp_path: Path
) -> None:
    old, new = old_and_new
    cert, key = install(old, tmp_path / "tls")
    env = embedded_env(tmp_path / "data", DATABASE_URL=migrated_url, INBOXD_TLS_CERT=str(cert), INBOXD_TLS_KEY=str(key))
    server = Serve(env, tmp_path / "serve.log").start()
    try:
        assert await serving(server.port, old.ca)
        install(new, tmp_path / "tls")
        assert server.proc is not None
        server.proc.send_signal(signal.SIGHUP)

        async def reloaded() -> bool | None:
            return True if "TLS certificate" in server.log_tail() and "reloaded" in server.log_tail() else None

        await poll(reloaded, within=30)
        assert await serving(server.port, new.ca)
        assert server.terminate() == 0
    finally:
        server.kill()


async def test_a_key_anybody_may_rewrite_is_refused_and_the_old_pair_stays(
    tls_server: RunningServer, old_and_new: tuple[Certs, Certs], tmp_path: Path
) -> None:
    old, new = old_and_new
    _, key = install(new, tmp_path / "tls")
    key.chmod(0o666)
    assert tls_server.certificates is not None
    with pytest.raises(ConfigError, match=r"INBOXD_TLS_KEY refused: .* is writable by every local account"):
        tls_server.certificates.reload()
    assert await serving(tls_server.port, old.ca)


async def test_grpcs_own_handshake_lines_stay_out_of_the_json_log(
    migrated_url: str, old_and_new: tuple[Certs, Certs], tmp_path: Path
) -> None:
    """A plaintext client against TLS made grpc's C core print `I1207 ... Handshake failed` into the JSON log."""
    cert, key = install(old_and_new[0], tmp_path / "tls")
    env = embedded_env(tmp_path / "data", DATABASE_URL=migrated_url, INBOXD_TLS_CERT=str(cert), INBOXD_TLS_KEY=str(key))
    env.pop("GRPC_VERBOSITY", None)
    server = Serve(env, tmp_path / "serve.log").start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            with pytest.raises(grpc.aio.AioRpcError):
                await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
        assert server.terminate() == 0
        lines = (tmp_path / "serve.log").read_text().splitlines()
        assert lines and not [line for line in lines if not line.startswith("{")], lines
    finally:
        server.kill()


async def test_the_cli_without_tls_against_a_tls_server_says_to_use_tls(tls_server: RunningServer) -> None:
    """Before, it said only "UNAVAILABLE: Socket closed" (or a handshake's text), no word of TLS."""
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "inboxd", "stats", "--target", f"127.0.0.1:{tls_server.port}", "--timeout", "5"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "UNAVAILABLE" in done.stderr
    assert (
        "no TLS was used: if inboxd at 127.0.0.1:" in done.stderr
        and "--tls-ca FILE or set INBOXD_TLS_CA" in done.stderr
    )
