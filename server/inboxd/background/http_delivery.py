"""One POST to a destination over aiohttp: redirects never followed, addresses judged after DNS resolution.

The session's resolver judges every address a host name resolves to
(domain/destination_addresses.py) and refuses the host whole when one of
them is internal and not allowed: an attacker's DNS that answers a public
and a private address gets neither. The connector connects to the
addresses the resolver answered, and keeps no DNS cache, so what was
judged is what is reached (no rebinding between the check and the
connection). A URL whose host is an address is judged here, before aiohttp
sees it (aiohttp skips the resolver for addresses).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from inboxd import __version__
from inboxd.domain.destination_addresses import AllowList, refusal
from inboxd.domain.destinations import EXCERPT_BYTES

USER_AGENT = f"inboxd/{__version__} (destinations)"


class AddressRefused(OSError):
    """The host resolves to an address destinations may not reach."""


@dataclass(frozen=True, slots=True)
class PostResult:
    # None: no answer (timeout, connection error, refused address).
    status: int | None
    latency: timedelta
    excerpt: bytes = b""
    error: str = ""
    retry_after: str | None = None
    location: str | None = None


class CheckedResolver(AbstractResolver):
    """Resolves with the system's resolver, then refuses a host with any address the allow list does not permit."""

    def __init__(self, allow: AllowList, inner: AbstractResolver | None = None) -> None:
        self._allow = allow
        self._inner = inner or DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self._inner.resolve(host, port, family)
        for info in found:
            why = refusal(host, ipaddress.ip_address(info["host"]), self._allow)
            if why is not None:
                raise AddressRefused(why)
        return found

    async def close(self) -> None:
        await self._inner.close()


def _refused(exc: BaseException) -> AddressRefused | None:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, AddressRefused):
            return seen
        inner = getattr(seen, "os_error", None)
        if isinstance(inner, AddressRefused):
            return inner
        seen = seen.__cause__ or seen.__context__
    return None


class HttpSender:
    """The runner's one aiohttp session; `post` never raises for what the endpoint or the network did."""

    def __init__(self, allow: AllowList, resolver: AbstractResolver | None = None) -> None:
        self.allow = allow
        # The system's resolver unless a test gives its own (to play a DNS that answers two ways).
        self._resolver = resolver
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            resolver = CheckedResolver(self.allow, self._resolver)
            connector = aiohttp.TCPConnector(resolver=resolver, use_dns_cache=False, limit=0)
            self._session = aiohttp.ClientSession(
                connector=connector, headers={"user-agent": USER_AGENT}, auto_decompress=False
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def address_refusal(self, url: str) -> str | None:
        """Why a URL whose host is an address may not be reached (a host name is judged when it resolves)."""
        host = urlsplit(url).hostname or ""
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return None
        return refusal(host, address, self.allow)

    async def post(self, url: str, body: bytes, headers: Mapping[str, str], within: timedelta) -> PostResult:
        began = time.monotonic()

        def took() -> timedelta:
            return timedelta(seconds=time.monotonic() - began)

        why = self.address_refusal(url)
        if why is not None:
            return PostResult(None, took(), error=why)
        session = self._open()
        seconds = within.total_seconds()
        options: dict[str, Any] = {"allow_redirects": False, "timeout": aiohttp.ClientTimeout(total=seconds)}
        try:
            async with asyncio.timeout(seconds):
                async with session.post(url, data=body, headers=dict(headers), **options) as response:
                    excerpt = await response.content.read(EXCERPT_BYTES)
                    return PostResult(
                        response.status,
                        took(),
                        excerpt,
                        retry_after=response.headers.get("retry-after"),
                        location=response.headers.get("location"),
                    )
        except TimeoutError:
            return PostResult(None, took(), error=f"no answer within the timeout of {seconds:g} s")
        except (aiohttp.ClientError, OSError) as exc:
            refused = _refused(exc)
            if refused is not None:
                return PostResult(None, took(), error=str(refused))
            return PostResult(None, took(), error=f"connection failed: {type(exc).__name__}: {exc}"[:1000])
