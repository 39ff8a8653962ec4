"""Which addresses a destination may reach: no server-side request forgery.

inboxd runs beside databases, metadata services and admin ports that only
trust their network. A destination's URL is an operator's input, so after
DNS resolution every address is judged: loopback, private, link-local,
shared (CGNAT), multicast, reserved and unspecified addresses are refused
unless INBOXD_DESTINATIONS_ALLOW names them (a CIDR, an address, or the
host name as written in the URL). The caller connects to the address judged
here, never resolves again, so no DNS rebinding slips between the check and
the connection.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class AllowList:
    """INBOXD_DESTINATIONS_ALLOW: networks and host names a destination may reach though they are internal."""

    networks: tuple[Network, ...] = ()
    hosts: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, entries: Sequence[str]) -> AllowList:
        networks: list[Network] = []
        hosts: set[str] = set()
        for raw in entries:
            entry = raw.strip()
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                hosts.add(entry.lower().rstrip("."))
        return cls(tuple(networks), frozenset(hosts))

    def allows(self, host: str, address: Address) -> bool:
        if host.lower().rstrip(".") in self.hosts:
            return True
        return any(address.version == net.version and address in net for net in self.networks)


def internal_kind(address: Address) -> str | None:
    """Why an address is internal ("loopback", "private", ...), or None for a public one."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return internal_kind(address.ipv4_mapped)
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_unspecified:
        return "unspecified"
    if address.is_multicast:
        return "multicast"
    if isinstance(address, ipaddress.IPv4Address) and address in ipaddress.ip_network("100.64.0.0/10"):
        return "shared (CGNAT)"
    if address.is_private:
        return "private"
    if address.is_reserved:
        return "reserved"
    return None


def refusal(host: str, address: Address, allow: AllowList) -> str | None:
    """Why a connection to `address` (resolved from `host`) is refused, or None when it may go ahead."""
    kind = internal_kind(address)
    if kind is None or allow.allows(host, address):
        return None
    return (
        f"address {address} of host {host!r} is {kind}: refused unless INBOXD_DESTINATIONS_ALLOW names it"
        " (server-side request forgery)"
    )
