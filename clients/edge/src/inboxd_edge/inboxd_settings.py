"""The edge's `[inboxd]` table: where inboxd is, how to reach it, and whether to forward over AcceptStream."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

# `accept_mode`: "auto" forwards over AcceptStream and falls back to unary Accept, for good, on a server that
# answers UNIMPLEMENTED; "stream" and "unary" force one of them.
ACCEPT_MODES = ("auto", "stream", "unary")
# A handful of streams spreads an edge's load over a server's processes (--workers); more buys nothing.
MAX_ACCEPT_STREAMS = 64


class InboxdSettingsError(ValueError):
    """A value of `[inboxd]` cannot be used; the message names the key."""


@dataclass(frozen=True)
class InboxdSettings:
    """How the edge reaches inboxd."""

    target: str = "127.0.0.1:50051"
    # Each Accept's deadline: past it the provider gets 503 and retries.
    deadline_seconds: float = 5.0
    # The environment variable holding the bearer token, if inboxd has a tokens file.
    token_env: str = "INBOXD_TOKEN"
    # A PEM file of CAs: set it to reach inboxd over TLS.
    tls_ca_file: str | None = None
    # Allows the bearer token in plaintext beyond loopback (the server's INBOXD_TRUSTED_NETWORK): TLS ends at
    # a proxy on a network you trust. Without it, a token and a remote target without a CA are refused.
    trusted_network: bool = False
    # How many AcceptStreams the edge keeps open, each on a connection of its own; deliveries take turns.
    accept_streams: int = 4
    accept_mode: str = "auto"


def inboxd_settings(table: Mapping[str, Any]) -> InboxdSettings:
    """The settings from the parsed `[inboxd]` table; raises InboxdSettingsError naming the key."""
    known = {f.name for f in fields(InboxdSettings)}
    if unknown := set(table) - known:
        raise InboxdSettingsError(f"[inboxd]: unknown keys {sorted(unknown)}")
    if not isinstance(table.get("trusted_network", False), bool):
        raise InboxdSettingsError("[inboxd]: trusted_network must be true or false")
    streams = table.get("accept_streams", InboxdSettings.accept_streams)
    if isinstance(streams, bool) or not isinstance(streams, int) or not 1 <= streams <= MAX_ACCEPT_STREAMS:
        raise InboxdSettingsError(
            f"[inboxd]: accept_streams must be a whole number from 1 to {MAX_ACCEPT_STREAMS}, not {streams!r}"
        )
    mode = table.get("accept_mode", InboxdSettings.accept_mode)
    if mode not in ACCEPT_MODES:
        raise InboxdSettingsError(f"[inboxd]: accept_mode must be one of {list(ACCEPT_MODES)}, not {mode!r}")
    return InboxdSettings(**table)
