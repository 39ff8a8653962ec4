"""The /metrics endpoint: a small HTTP/1.1 responder on the server's own event loop.

On the event loop rather than prometheus_client's thread server, so a scrape
can first refresh the health gauges with an async Stats query, and so
stopping the server stops the endpoint with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger(__name__)

# A scrape waits at most this long for fresh gauges, then serves the last ones.
REFRESH_TIMEOUT_SECONDS = 5.0
_READ_TIMEOUT_SECONDS = 10.0
_MAX_HEADER_LINES = 100
# After refusing an oversized request: how much of its rest is read and dropped, at most.
_DISCARD_CHUNKS = 16
_DISCARD_SECONDS = 1.0


def split_listen(listen: str) -> tuple[str | None, int]:
    """'127.0.0.1:9464' -> ('127.0.0.1', 9464); '[::1]:9464' -> ('::1', 9464); ':9464' -> all interfaces."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"INBOXD_METRICS_LISTEN={listen!r} needs a host and a port, e.g. 127.0.0.1:9464")
    return (host.strip("[]") or None), int(port)


class MetricsEndpoint:
    def __init__(self, registry: CollectorRegistry, before_scrape: Callable[[], Awaitable[None]] | None = None) -> None:
        self.registry = registry
        self.before_scrape = before_scrape
        self._server: asyncio.Server | None = None

    async def start(self, listen: str) -> int:
        """Listens on `listen` ("host:port", port 0 picks one); returns the bound port."""
        host, port = split_listen(listen)
        self._server = await asyncio.start_server(self._handle, host, port)
        bound: int = self._server.sockets[0].getsockname()[1]
        return bound

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                request = await asyncio.wait_for(reader.readline(), _READ_TIMEOUT_SECONDS)
            except ValueError:  # longer than the reader's limit (64 KiB): no scraper sends that
                await self._refuse(reader, writer, "414 URI Too Long", "the request line is over 64 KiB")
                return
            try:
                for _ in range(_MAX_HEADER_LINES):  # the headers say nothing we need
                    if (await asyncio.wait_for(reader.readline(), _READ_TIMEOUT_SECONDS)) in (b"\r\n", b"\n", b""):
                        break
            except ValueError:
                await self._refuse(reader, writer, "431 Request Header Fields Too Large", "a header is over 64 KiB")
                return
            parts = request.decode("latin-1").split()
            path = parts[1].split("?", 1)[0] if len(parts) >= 2 else ""
            if len(parts) < 2 or parts[0] not in ("GET", "HEAD"):
                await self._answer(writer, "405 Method Not Allowed", b"GET /metrics\n", "text/plain")
            elif path not in ("/metrics", "/"):
                await self._answer(writer, "404 Not Found", b"see /metrics\n", "text/plain")
            else:
                await self._refresh()
                body = generate_latest(self.registry)
                await self._answer(writer, "200 OK", b"" if parts[0] == "HEAD" else body, CONTENT_TYPE_LATEST)
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass  # a scraper that went away; nothing to answer
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _refresh(self) -> None:
        if self.before_scrape is None:
            return
        try:
            await asyncio.wait_for(self.before_scrape(), REFRESH_TIMEOUT_SECONDS)
        except Exception as exc:  # noqa: BLE001 - the last gauges still serve; say why they are old
            log.warning("metrics: gauges not refreshed for this scrape: %s", exc or type(exc).__name__)

    async def _refuse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, status: str, why: str) -> None:
        """Answers a request too large to read, then discards (boundedly) what is left of it.

        Closing with unread bytes would reset the connection, and the client would never see the answer.
        """
        await self._answer(writer, status, why.encode() + b"\n", "text/plain")
        if writer.can_write_eof():
            writer.write_eof()
        with contextlib.suppress(TimeoutError, ConnectionError):
            for _ in range(_DISCARD_CHUNKS):
                if not await asyncio.wait_for(reader.read(65536), _DISCARD_SECONDS):
                    break

    @staticmethod
    async def _answer(writer: asyncio.StreamWriter, status: str, body: bytes, content_type: str) -> None:
        head = (
            f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        writer.write(head.encode("latin-1") + body)
        await writer.drain()
