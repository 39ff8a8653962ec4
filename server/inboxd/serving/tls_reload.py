"""The server's TLS certificate, read again on SIGHUP: a renewed certificate is served without a restart."""

from __future__ import annotations

import logging
import ssl
from pathlib import Path

import grpc

from inboxd.config.file_modes import others_may_rewrite
from inboxd.config.settings import ConfigError


class ServerCertificates:
    """INBOXD_TLS_CERT and _KEY (and _CLIENT_CA), handed to grpc at each new connection's handshake.

    grpc asks `_fetch` before every handshake; it answers the files read by
    the last `reload()` once, then None (keep what you have). Connections
    already open keep the certificate they were made with.
    """

    def __init__(self, cert: Path, key: Path, client_ca: Path | None) -> None:
        self.cert, self.key, self.client_ca = cert, key, client_ca
        self._initial = self._read()
        self._next: grpc.ServerCertificateConfiguration | None = None

    def credentials(self) -> grpc.ServerCredentials:
        # grpc-stubs types the fetcher without None, which grpc's own docs allow ("None for no change").
        return grpc.dynamic_ssl_server_credentials(
            self._initial,
            self._fetch,  # type: ignore[arg-type]
            require_client_authentication=self.client_ca is not None,
        )

    def reload(self) -> None:
        """Reads the files again for the next handshakes; raises ConfigError (the old ones stay) if they are bad."""
        self._next = self._read()

    def reload_logged(self, log: logging.Logger, who: str = "") -> None:
        """reload(), said in the log either way: SIGHUP's handler."""
        try:
            self.reload()
            log.info("%sTLS certificate %s reloaded: new connections get it", who, self.cert)
        except ConfigError as exc:
            log.error("%sTLS certificate not reloaded, the previous one stays in use: %s", who, exc)

    def _fetch(self) -> grpc.ServerCertificateConfiguration | None:
        # Called on grpc's own threads: one swap of a reference, nothing to lock.
        fresh, self._next = self._next, None
        return fresh

    def _read(self) -> grpc.ServerCertificateConfiguration:
        unsafe = others_may_rewrite(self.key)
        if unsafe is not None:
            raise ConfigError(f"INBOXD_TLS_KEY refused: {unsafe}")
        try:
            cert = self.cert.read_bytes()
            key = self.key.read_bytes()
            client_ca = self.client_ca.read_bytes() if self.client_ca else None
        except OSError as exc:
            raise ConfigError(f"cannot read a TLS file: {exc.filename}: {exc.strerror}") from None
        try:
            # grpc would take a mismatched pair and fail every handshake after: check it first.
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(self.cert, self.key)
        except (ssl.SSLError, ValueError) as exc:
            raise ConfigError(
                f"INBOXD_TLS_CERT {self.cert} and INBOXD_TLS_KEY {self.key} are not a certificate and its key: {exc}"
            ) from None
        return grpc.ssl_server_certificate_configuration([(key, cert)], root_certificates=client_ca)
