"""TLS and mutual TLS from the client's side, against FakeInbox with throwaway certificates made by openssl."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from inboxd_client import AsyncInboxClient, InboxError, TlsConfig
from tests.client.fake_inbox import FakeInbox

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def issue(folder: Path, name: str, ca: str, usage: str) -> None:
    """name.pem/name.key signed by the CA `ca`, valid for 127.0.0.1 and inboxd.test."""
    key, csr, ext = folder / f"{name}.key", folder / f"{name}.csr", folder / f"{name}.ext"
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(csr))
    ext.write_text(f"subjectAltName=IP:127.0.0.1,DNS:inboxd.test\nextendedKeyUsage={usage}\n")
    openssl("x509", "-req", "-in", str(csr), "-CA", str(folder / f"{ca}.pem"), "-CAkey", str(folder / f"{ca}.key"),
            "-CAcreateserial", "-days", "2", "-extfile", str(ext), "-out", str(folder / f"{name}.pem"))  # fmt: skip


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tls")
    for ca in ("ca", "other-ca"):
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={ca}",
                "-keyout", str(folder / f"{ca}.key"), "-out", str(folder / f"{ca}.pem"))  # fmt: skip
    issue(folder, "server", "ca", "serverAuth")
    issue(folder, "client", "ca", "clientAuth")
    issue(folder, "stranger", "other-ca", "clientAuth")
    return folder


@pytest.fixture
async def mtls_fake(certs: Path) -> AsyncIterator[FakeInbox]:
    credentials = grpc.ssl_server_credentials(
        [((certs / "server.key").read_bytes(), (certs / "server.pem").read_bytes())],
        root_certificates=(certs / "ca.pem").read_bytes(),
        require_client_auth=True,
    )
    fake = await FakeInbox().start(credentials)
    yield fake
    await fake.stop()


def tls(certs: Path, client: str | None, server_name: str | None = None) -> TlsConfig:
    return TlsConfig.from_files(
        certs / "ca.pem",
        certs / f"{client}.pem" if client else None,
        certs / f"{client}.key" if client else None,
        server_name=server_name,
    )


async def test_a_client_certificate_from_the_trusted_ca_gets_through_mutual_tls(
    mtls_fake: FakeInbox, certs: Path
) -> None:
    async with AsyncInboxClient(mtls_fake.target, tls=tls(certs, "client"), token="t") as client:
        await client.stats()
    assert mtls_fake.calls["Stats"] == 1
    assert mtls_fake.metadata[-1]["authorization"] == "Bearer t"


@pytest.mark.parametrize("who", [None, "stranger"], ids=["no-client-cert", "cert-from-another-ca"])
async def test_mutual_tls_refuses_a_client_without_a_trusted_certificate(
    mtls_fake: FakeInbox, certs: Path, who: str | None
) -> None:
    async with AsyncInboxClient(mtls_fake.target, tls=tls(certs, who), retry=None, timeout=5) as client:
        with pytest.raises(InboxError):
            await client.stats()
    assert mtls_fake.calls["Stats"] == 0


async def test_server_name_checks_the_certificate_against_another_name(mtls_fake: FakeInbox, certs: Path) -> None:
    async with AsyncInboxClient(mtls_fake.target, tls=tls(certs, "client", server_name="inboxd.test")) as client:
        await client.stats()
    async with AsyncInboxClient(
        mtls_fake.target, tls=tls(certs, "client", server_name="elsewhere.test"), retry=None, timeout=5
    ) as client:
        with pytest.raises(InboxError):
            await client.stats()


def test_a_client_certificate_needs_its_key() -> None:
    with pytest.raises(ValueError, match="both"):
        TlsConfig(certificate_chain=b"cert")
