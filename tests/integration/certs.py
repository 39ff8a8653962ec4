"""Throwaway certificate authorities and certificates for the TLS tests, made with openssl."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Certs:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path
    other_client_cert: Path
    other_client_key: Path


def _run(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _ca(folder: Path, name: str) -> tuple[Path, Path]:
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    _run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
         "-keyout", str(key), "-out", str(cert))  # fmt: skip
    return cert, key


def _leaf(folder: Path, name: str, ca: tuple[Path, Path], *, server: bool) -> tuple[Path, Path]:
    cert, key, csr, ext = (folder / f"{name}{s}" for s in (".pem", ".key", ".csr", ".ext"))
    _run("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(csr))
    usage = "serverAuth" if server else "clientAuth"
    ext.write_text(f"subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage={usage}\n")
    _run("x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]), "-CAcreateserial",
         "-days", "2", "-extfile", str(ext), "-out", str(cert))  # fmt: skip
    return cert, key


def make_certs(folder: Path) -> Certs:
    ca = _ca(folder, "ca")
    other = _ca(folder, "other-ca")
    server = _leaf(folder, "server", ca, server=True)
    client = _leaf(folder, "client", ca, server=False)
    stranger = _leaf(folder, "stranger", other, server=False)
    return Certs(ca[0], server[0], server[1], client[0], client[1], other[0], stranger[0], stranger[1])
