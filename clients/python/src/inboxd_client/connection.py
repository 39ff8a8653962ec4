"""How a client reaches inboxd: TLS, the bearer token, and the retry policy handed to gRPC.

Retries are gRPC's own (its service-config `retryPolicy`), not a loop in this
client: gRPC knows whether a request left the process, buffers it for the
retry, and honours the call's deadline across attempts. Only the RPCs marked
`retry_safe` in `rpcs` get a policy; the others are never retried.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from inboxd_client.rpcs import ALL_RPCS

ChannelOption = tuple[str, Any]
Metadata = tuple[tuple[str, str], ...]

# Keepalive pings: a path that goes silent (no FIN, no RST) is noticed within
# about time + timeout (15 s), and its calls end UNAVAILABLE, rather than a
# Work stream's handlers running on for the hour it takes TCP to give up.
# inboxd permits a ping every 5 s; an older server every 5 minutes, and
# answers more with GOAWAY `too_many_pings` (pass the options to change these).
KEEPALIVE_TIME_MS = 10_000
KEEPALIVE_TIMEOUT_MS = 5_000
# A connection that failed is tried again after the first, growing to the second: back within a second.
RECONNECT_BACKOFF_MS = (250, 1_000)


@dataclass(frozen=True)
class TlsConfig:
    """TLS for the channel: which CA to trust, and a client certificate for mutual TLS.

    `root_certificates=None` trusts gRPC's default roots. Give `certificate_chain`
    and `private_key` together when the server asks for a client certificate.
    `server_name` overrides the name checked against the server's certificate
    (for a certificate issued to a name other than the one you dial).
    """

    root_certificates: bytes | None = None
    certificate_chain: bytes | None = None
    private_key: bytes | None = None
    server_name: str | None = None

    def __post_init__(self) -> None:
        if (self.certificate_chain is None) != (self.private_key is None):
            raise ValueError("mutual TLS needs both certificate_chain and private_key, or neither")

    @classmethod
    def from_files(
        cls,
        root_certificates: str | Path | None = None,
        certificate_chain: str | Path | None = None,
        private_key: str | Path | None = None,
        server_name: str | None = None,
    ) -> TlsConfig:
        """The same, read from PEM files."""

        def read(path: str | Path | None) -> bytes | None:
            return None if path is None else Path(path).read_bytes()

        return cls(read(root_certificates), read(certificate_chain), read(private_key), server_name)

    def credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=self.root_certificates,
            private_key=self.private_key,
            certificate_chain=self.certificate_chain,
        )


@dataclass(frozen=True)
class RetryPolicy:
    """How gRPC retries UNAVAILABLE for the RPCs that are safe to retry.

    gRPC allows at most 5 attempts per call; backoffs are in seconds, jittered by gRPC.
    """

    max_attempts: int = 5
    initial_backoff: float = 0.2
    max_backoff: float = 5.0
    backoff_multiplier: float = 2.0

    def __post_init__(self) -> None:
        if not 2 <= self.max_attempts <= 5:
            raise ValueError(f"max_attempts={self.max_attempts}: gRPC retries allow 2 to 5 attempts")
        if self.initial_backoff <= 0 or self.max_backoff < self.initial_backoff or self.backoff_multiplier <= 0:
            raise ValueError("backoffs must be positive, with max_backoff >= initial_backoff")


def service_config(retry: RetryPolicy | None) -> str:
    """The gRPC service config: a retryPolicy for the retry-safe RPCs only (none when `retry` is None)."""
    if retry is None:
        return json.dumps({"methodConfig": []})
    safe = [{"service": rpc.service, "method": rpc.name} for rpc in ALL_RPCS if rpc.retry_safe]
    policy = {
        "maxAttempts": retry.max_attempts,
        "initialBackoff": f"{retry.initial_backoff}s",
        "maxBackoff": f"{retry.max_backoff}s",
        "backoffMultiplier": retry.backoff_multiplier,
        # Only UNAVAILABLE: inboxd answers it when nothing was acknowledged.
        # DEADLINE_EXCEEDED is not here: the server may have acted.
        "retryableStatusCodes": ["UNAVAILABLE"],
    }
    return json.dumps({"methodConfig": [{"name": safe, "retryPolicy": policy}]})


def channel_options(
    retry: RetryPolicy | None, tls: TlsConfig | None, extra: Sequence[ChannelOption] = ()
) -> list[ChannelOption]:
    options: list[ChannelOption] = [
        ("grpc.enable_retries", 1),
        ("grpc.service_config", service_config(retry)),
        # Ours, not whatever a DNS TXT record says.
        ("grpc.service_config_disable_resolution", 1),
        # A Claim of many events with large payloads easily passes gRPC's 4 MiB
        # default, and the events of an answer refused for its size are already
        # leased: no limit, unless the caller sets one (a Worker then claims fewer).
        ("grpc.max_receive_message_length", -1),
        ("grpc.keepalive_time_ms", KEEPALIVE_TIME_MS),
        ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
        # grpcio closed no silent connection on the keepalive timeout alone: this one must say it too.
        ("grpc.http2.ping_timeout_ms", KEEPALIVE_TIMEOUT_MS),
        # A quiet stream sends no data: keep pinging it all the same.
        ("grpc.http2.max_pings_without_data", 0),
        # gRPC's own reconnect backoff grows to 120 s, and while it waits every call fails at once: a
        # worker would come back long after its server. A refused connect costs nothing: try every second.
        ("grpc.initial_reconnect_backoff_ms", RECONNECT_BACKOFF_MS[0]),
        ("grpc.max_reconnect_backoff_ms", RECONNECT_BACKOFF_MS[1]),
    ]
    if tls is not None and tls.server_name:
        options.append(("grpc.ssl_target_name_override", tls.server_name))
    # gRPC takes the first of two settings of one name: the caller's own replace ours.
    given = {name for name, _ in extra}
    return [option for option in options if option[0] not in given] + list(extra)


def channel_settings(
    tls: TlsConfig | bool, retry: RetryPolicy | None, extra: Sequence[ChannelOption] = ()
) -> tuple[grpc.ChannelCredentials | None, list[ChannelOption]]:
    """A client's `tls`, `retry` and `options` as either flavour of gRPC channel takes them.

    The credentials are None for plaintext; `tls=True` means gRPC's default roots.
    """
    tls_config = TlsConfig() if tls is True else (tls or None)
    credentials = None if tls_config is None else tls_config.credentials()
    return credentials, channel_options(retry, tls_config, extra)


def call_metadata(token: str | None) -> Metadata:
    """`authorization: Bearer <token>` on every call, or nothing."""
    if not token:
        return ()
    if any(c in token for c in "\r\n\x00"):
        raise ValueError("the token holds a line break or NUL, which gRPC metadata cannot carry")
    return (("authorization", f"Bearer {token}"),)
