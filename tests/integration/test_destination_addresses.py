"""No server-side request forgery: what a destination may reach, judged after DNS resolution.

Each rule has its test: internal ranges are refused (by address and by a
host name that resolves to one), the allow list lets a named network or
host through, a host with one internal address among public ones is
refused whole, and the connection goes to the address that was judged
(one resolution per request: no rebinding between check and connect).
The endpoint is real (aiohttp on 127.0.0.1); only the DNS that answers
two ways is played by a resolver of the test's own.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import AsyncIterator
from datetime import timedelta

import grpc
import pytest
from aiohttp.abc import AbstractResolver, ResolveResult

from inboxd.background.http_delivery import CheckedResolver, HttpSender
from inboxd.config.settings import Settings
from inboxd.domain.destination_addresses import AllowList, internal_kind
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd_client.v1 import admin_pb2, admin_pb2_grpc, inbox_pb2_grpc
from tests.conftest import NO_BULK_RUNNER, NO_RESCUER
from tests.integration.destination_endpoint import Endpoint, destinations_removed, endpoint
from tests.integration.helpers import accept_request, read_event, seconds
from tests.integration.procs import poll

__all__ = ["destinations_removed", "endpoint"]

TIMEOUT = timedelta(seconds=5)


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("fc00::1", "private"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("100.64.0.1", "shared (CGNAT)"),
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("93.184.216.34", None),
        ("2606:4700::1111", None),
    ],
)
def test_internal_ranges_are_named_and_public_addresses_pass(address: str, kind: str | None) -> None:
    assert internal_kind(ipaddress.ip_address(address)) == kind


async def test_a_host_name_resolving_to_loopback_is_refused_and_nothing_is_sent(endpoint: Endpoint) -> None:
    sender = HttpSender(AllowList())
    try:
        result = await sender.post(f"http://localhost:{endpoint.port}/ok", b"{}", {}, TIMEOUT)
    finally:
        await sender.close()
    assert result.status is None
    assert "is loopback: refused unless INBOXD_DESTINATIONS_ALLOW names it" in result.error
    assert endpoint.received == []


async def test_a_loopback_address_in_the_url_is_refused(endpoint: Endpoint) -> None:
    sender = HttpSender(AllowList())
    try:
        result = await sender.post(endpoint.url("ok"), b"{}", {}, TIMEOUT)
    finally:
        await sender.close()
    assert "address 127.0.0.1 of host '127.0.0.1' is loopback" in result.error
    assert endpoint.received == []


@pytest.mark.parametrize("allowed", ["127.0.0.1/32", "127.0.0.0/8", "localhost"])
async def test_the_allow_list_lets_a_named_network_or_host_through(endpoint: Endpoint, allowed: str) -> None:
    sender = HttpSender(AllowList.parse([allowed]))
    try:
        result = await sender.post(f"http://localhost:{endpoint.port}/ok", b"{}", {}, TIMEOUT)
    finally:
        await sender.close()
    assert result.status == 200, result.error
    assert len(endpoint.received) == 1


class TwoFacedDns(AbstractResolver):
    """Answers `first` on the first lookup and `later` on every other: a rebinding attacker's DNS."""

    def __init__(self, first: list[str], later: list[str]) -> None:
        self.answers = [first, later]
        self.lookups = 0

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        addresses = self.answers[min(self.lookups, 1)]
        self.lookups += 1
        return [
            {"hostname": host, "host": a, "port": port, "family": family, "proto": 0, "flags": 0} for a in addresses
        ]

    async def close(self) -> None:
        pass


async def test_a_host_with_one_internal_address_among_public_ones_is_refused_whole() -> None:
    resolver = CheckedResolver(AllowList(), TwoFacedDns(["93.184.216.34", "10.0.0.7"], []))
    with pytest.raises(OSError, match=re.escape("10.0.0.7 of host 'hooks.example' is private")):
        await resolver.resolve("hooks.example", 443)


async def test_the_connection_goes_to_the_address_that_was_judged(endpoint: Endpoint) -> None:
    # Judged: 127.0.0.1 (allowed). Were the name resolved again to connect, it would find 10.0.0.5.
    dns = TwoFacedDns(["127.0.0.1"], ["10.0.0.5"])
    sender = HttpSender(AllowList.parse(["127.0.0.1/32"]), resolver=dns)
    try:
        result = await sender.post(f"http://hooks.example:{endpoint.port}/ok", b"{}", {}, TIMEOUT)
    finally:
        await sender.close()
    assert result.status == 200, result.error
    assert dns.lookups == 1
    assert endpoint.received[0].headers["host"] == f"hooks.example:{endpoint.port}"


@pytest.fixture(scope="module")
async def unallowed(db: Database) -> AsyncIterator[RunningServer]:
    """A server that delivers, over http, with no INBOXD_DESTINATIONS_ALLOW."""
    settings = Settings(
        listen="127.0.0.1:0",
        rescue_interval=NO_RESCUER,
        bulk_poll=NO_BULK_RUNNER,
        destinations_poll=timedelta(seconds=0.2),
        destinations_allow_http=True,
    )
    running = await start_server(settings, db)
    yield running
    await running.stop(1.0)


async def test_a_destination_on_loopback_fails_its_events_naming_the_rule(
    unallowed: RunningServer, endpoint: Endpoint, db: Database, ns: str
) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{unallowed.port}") as chan:
        admin = admin_pb2_grpc.InboxAdminServiceStub(chan)
        await admin.CreateDestination(
            admin_pb2.CreateDestinationRequest(
                name=f"ssrf-{ns[-12:]}", url=f"http://localhost:{endpoint.port}/ok", namespace_pattern=ns,
                backoff_base=seconds(60), reason="test",
            )
        )  # fmt: skip
        await inbox_pb2_grpc.InboxServiceStub(chan).Accept(accept_request(ns, "evt-1"))

        async def failed() -> str | None:
            row = await read_event(db, ns, "evt-1")
            return row["last_error"] if row["state"] == "pending" and row["last_error"] else None

        error = await poll(failed, within=10.0)
    assert "is loopback: refused unless INBOXD_DESTINATIONS_ALLOW names it" in error
    assert endpoint.received == []
