"""Whether a bearer token may travel in plaintext to a target: only on loopback, or on a network said to be trusted.

The server refuses to listen beyond loopback without TLS unless its operator
says the network is trusted (`INBOXD_TRUSTED_NETWORK=1`, `--trusted-network`).
A client holds the other end of the same rule: a token sent in clear to a
remote target is a token anyone on the path may read, whatever the server does.
The admin CLI and the edge use it with the server's own override.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

__all__ = ["PlaintextTokenRefused", "is_loopback_target", "refuse_plaintext_token", "trusted_network_from"]


class PlaintextTokenRefused(ValueError):
    """A bearer token would cross the network in plaintext; the message says how to go on."""


def trusted_network_from(environ: Mapping[str, str]) -> bool:
    """Whether INBOXD_TRUSTED_NETWORK, the server's own override, is set on (1, true, yes, on)."""
    return environ.get("INBOXD_TRUSTED_NETWORK", "").strip().lower() in {"1", "true", "yes", "on"}


def is_loopback_target(target: str) -> bool:
    """True for a host:port (or `unix:` path) that cannot leave this machine; a name other than localhost may."""
    if target.startswith(("unix:", "unix-abstract:")):
        return True
    address = target.removeprefix("dns:///").removeprefix("ipv4:").removeprefix("ipv6:")
    if address.startswith("["):
        host = address[1:].partition("]")[0]  # [::1]:50051
    elif address.count(":") == 1:
        host = address.partition(":")[0]  # 127.0.0.1:50051, localhost:50051
    else:
        host = address  # no port, or a bare IPv6 address
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def refuse_plaintext_token(target: str, *, token: str | None, tls: bool, trusted_network: bool) -> None:
    """Raises PlaintextTokenRefused when `token` would go in clear to a target beyond loopback."""
    if not token or tls or trusted_network or is_loopback_target(target):
        return
    raise PlaintextTokenRefused(
        f"refusing to send a bearer token in plaintext to {target}: anyone on the path could read it. "
        "Give a CA (TLS), reach inboxd on loopback, or, when the network in between is one you trust, "
        "set INBOXD_TRUSTED_NETWORK=1 (--trusted-network), the same override the server takes."
    )
