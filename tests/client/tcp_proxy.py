"""A TCP proxy between a client and a server, whose connections a test can cut or silence, on demand."""

from __future__ import annotations

import asyncio
import contextlib


class TcpProxy:
    """Forwards 127.0.0.1:`port` to `upstream`.

    `cut()` resets every connection and refuses new ones until `mend()`.
    `go_silent()` is a path that goes quiet with no FIN and no RST (a
    partition, a NAT that dropped its state, a frozen VM): every connection
    stays open, and nothing more crosses it either way, not even a close.
    """

    def __init__(self, upstream_port: int) -> None:
        self._upstream_port = upstream_port
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        # Connections taken while silent: never answered, reset when the path mends (the client then dials again).
        self._unanswered: set[asyncio.StreamWriter] = set()
        self._refusing = False
        self.silent = False
        self.port = 0

    async def start(self) -> TcpProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        self.cut()
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    def cut(self) -> None:
        """Drops every open connection at once, both ways, and refuses new ones."""
        self._refusing = True
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    def go_silent(self) -> None:
        """From now on, what either side sends is read and dropped; new connections are taken and never answered."""
        self.silent = True

    def mend(self) -> None:
        self._refusing = False
        self.silent = False
        for writer in self._unanswered:
            writer.transport.abort()
        self._unanswered.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._refusing:
            writer.transport.abort()
            return
        self._writers.add(writer)
        if self.silent:
            self._unanswered.add(writer)
            await _swallow(reader)
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._upstream_port)
        self._writers.add(up_writer)
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(65536):
                if not self.silent:
                    writer.write(data)
                    await writer.drain()
        if not self.silent:  # a silent path carries no close either
            writer.transport.abort()


async def _swallow(reader: asyncio.StreamReader) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while await reader.read(65536):
            pass
