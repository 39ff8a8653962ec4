"""Closes a connection that carries calls, none of them with a valid token, for longer than a bound.

The connection cap (`serving.connections`) protects descriptors, and
`INBOXD_CONNECTION_IDLE` frees a connection with no call in flight. But a
stranger keeps a connection "busy" for free: one open health Watch, or a
health check every few minutes. A review held all 10 connections of a capped
server with 10 Watch streams, and a legitimate Accept was UNAVAILABLE for as
long as they stayed open, up to the connection's age (1 h).

So every call says where it came from (`context.peer()`) and whether its
caller had a valid token. A connection whose first call came without one
and that has carried no call with one within `bound` seconds is closed.
grpc offers no way to close one connection, so its socket is found among
this process's descriptors (its peer address and our port) and shut down:
grpc sees the peer gone and ends its calls, and the slot is free. Only TCP
connections are judged; without a tokens file there are no strangers.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import socket
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

SWEEP_SECONDS = 1.0
# The peers vouched for are checked against the live connections this often, or at this many, or when
# a stranger is due: a closed connection's port is reused, and its next owner must not inherit the voucher.
PRUNE_SECONDS = 60.0
_PRUNE_AT = 4096


def peer_name(family: int, address: tuple[str, int] | tuple[str, int, int, int]) -> str:
    """The peer as grpc's `context.peer()` writes it: `ipv4:1.2.3.4:5` or `ipv6:[::1]:5`."""
    host, port = address[0], address[1]
    ip = ipaddress.ip_address(host.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if isinstance(ip, ipaddress.IPv4Address):
        return f"ipv4:{ip}:{port}"
    return f"ipv6:[{ip}]:{port}"


def _normal(peer: str) -> str:
    """grpc may name an IPv4 client of an IPv6 socket `ipv6:[::ffff:1.2.3.4]:5`: one name for both."""
    if peer.startswith("ipv6:[::ffff:"):
        host, _, port = peer[len("ipv6:[") :].rpartition("]:")
        with contextlib.suppress(ValueError):
            return peer_name(socket.AF_INET6, (host, int(port)))
    return peer


def accepted_connections(port: int) -> dict[str, int]:
    """This process's TCP connections accepted on `port`, by peer name: peer -> descriptor."""
    found: dict[str, int] = {}
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError, ValueError):
            if not os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                continue
            fd = int(name)
            with socket.socket(fileno=os.dup(fd)) as sock:  # closing the copy leaves the connection alone
                if sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.getsockname()[1] != port:
                    continue
                found[peer_name(sock.family, sock.getpeername())] = fd
    return found


def shut_down(fd: int, peer: str) -> bool:
    """Shuts the socket `fd` down, both ways, if it is still the connection to `peer`; True if it was."""
    with contextlib.suppress(OSError), socket.socket(fileno=os.dup(fd)) as sock:
        if peer_name(sock.family, sock.getpeername()) != peer:
            return False  # closed meanwhile, and its number taken by another socket
        sock.shutdown(socket.SHUT_RDWR)
        return True
    return False


class StrangerConnections:
    """Hears every call's peer and whether it had a valid token; closes strangers' connections after `bound`."""

    def __init__(self, port: int, bound: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.port = port
        self.bound = bound
        self.clock = clock
        self.closed = 0
        self._vouched: set[str] = set()
        self._strangers: dict[str, float] = {}  # peer -> when its first call without a token came
        self._pruned = clock()
        self._task: asyncio.Task[None] | None = None

    def seen(self, peer: str, vouched: bool) -> None:
        """A call came from `peer`; `vouched`: with a valid token. Cheap: every admitted call says so."""
        if vouched:
            if peer not in self._vouched:  # the common case costs one set lookup
                peer = _normal(peer)
                self._vouched.add(peer)
                self._strangers.pop(peer, None)
            return
        peer = _normal(peer)
        if peer not in self._vouched and peer not in self._strangers and peer.startswith("ipv"):
            self._strangers[peer] = self.clock()

    def sweep(self) -> int:
        """Closes the strangers' connections past the bound; forgets connections gone. Returns how many it closed."""
        now = self.clock()
        due = [peer for peer, since in self._strangers.items() if now - since >= self.bound]
        if not due and len(self._vouched) < _PRUNE_AT and now - self._pruned < PRUNE_SECONDS:
            return 0
        self._pruned = now
        live = accepted_connections(self.port)
        # A peer's port is reused by later connections: what is gone is forgotten, vouched or not.
        self._vouched &= live.keys()
        closed = 0
        for peer in due:
            del self._strangers[peer]
            fd = live.get(peer)
            if fd is not None and shut_down(fd, peer):
                closed += 1
        for peer in [peer for peer in self._strangers if peer not in live]:
            del self._strangers[peer]
        if closed:
            self.closed += closed
            log.info(
                "closed %d connection(s) that carried no call with a valid token within %.0f s", closed, self.bound
            )
        return closed

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        # A stranger's connection lasts at most the bound and a second; a sweep with nothing due costs nothing.
        while True:
            await asyncio.sleep(SWEEP_SECONDS)
            try:
                self.sweep()
            except Exception:
                log.exception("could not close connections without a token")
