"""A stranger speaking HTTP/2 itself: many gRPC calls, each declaring a big message, pushed as fast as the server lets.

A grpc client copies each request into a buffer of its own, so 128 calls of
31 MiB would cost the test 4 GB; here one chunk of zeros is sent again and
again, so the client holds nothing per call and sends exactly what the
server's flow control grants. What the server then holds is its own doing.
"""

from __future__ import annotations

import selectors
import socket
import struct
import time
from dataclasses import dataclass, field

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings

_CHUNK = memoryview(bytes(16 * 1024))


@dataclass
class _Call:
    prefix: bytes  # the gRPC message header: not compressed, then the declared length
    left: int  # body bytes still to send
    status: str | None = None  # grpc-status, or "reset" / "closed"


@dataclass
class _Connection:
    sock: socket.socket
    conn: h2.connection.H2Connection
    calls: dict[int, _Call] = field(default_factory=dict)


def _headers(path: str, metadata: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [
        (":method", "POST"),
        (":scheme", "http"),
        (":authority", "inboxd"),
        (":path", path),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
        *metadata,
    ]


def _open(port: int) -> _Connection:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.setblocking(False)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    # Our own receive window wide open: the server's answers never wait on us.
    conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 2**31 - 1})
    conn.increment_flow_control_window(2**30)
    return _Connection(sock, conn)


def _push(c: _Connection) -> None:
    for stream, call in c.calls.items():
        if call.status is not None:
            continue
        try:
            if call.prefix:
                room = c.conn.local_flow_control_window(stream)
                if room < len(call.prefix):
                    continue
                c.conn.send_data(stream, call.prefix)
                call.prefix = b""
            while call.left > 0:
                room = min(c.conn.local_flow_control_window(stream), c.conn.max_outbound_frame_size, call.left)
                if room <= 0:
                    break
                c.conn.send_data(stream, _CHUNK[:room].tobytes() if room < len(_CHUNK) else _CHUNK.tobytes())
                call.left -= room
            if call.left == 0 and not call.prefix:
                c.conn.end_stream(stream)
                call.left = -1
        except h2.exceptions.StreamClosedError:
            call.status = call.status or "closed"


def _flush(c: _Connection) -> None:
    data = c.conn.data_to_send()
    view = memoryview(data)
    while view:
        try:
            sent = c.sock.send(view)
        except BlockingIOError:
            time.sleep(0.001)
            continue
        view = view[sent:]


def _take(c: _Connection) -> None:
    try:
        data = c.sock.recv(1 << 20)
    except BlockingIOError:
        return
    if not data:
        for each in c.calls.values():
            each.status = each.status or "closed"
        return
    for event in c.conn.receive_data(data):
        call = c.calls.get(getattr(event, "stream_id", 0) or 0)
        if isinstance(event, h2.events.ResponseReceived | h2.events.TrailersReceived) and call is not None:
            for name, value in event.headers or ():
                if name in {"grpc-status", b"grpc-status"}:
                    call.status = value.decode() if isinstance(value, bytes) else str(value)
        elif isinstance(event, h2.events.StreamReset) and call is not None:
            call.status = call.status or "reset"
        elif isinstance(event, h2.events.ConnectionTerminated):
            for each in c.calls.values():
                each.status = each.status or "closed"


def flood(
    port: int,
    path: str,
    *,
    calls: int,
    message_bytes: int,
    connections: int = 4,
    metadata: list[tuple[str, str]] | None = None,
    within: float = 120.0,
) -> list[str]:
    """`calls` calls of `path`, spread over `connections`, each declaring a message of `message_bytes`.

    Pushes every byte the server grants until each call is answered; returns each call's grpc-status
    (or "reset"/"closed"). Raises TimeoutError when calls are still open after `within` seconds.
    """
    opened = [_open(port) for _ in range(connections)]
    selector = selectors.DefaultSelector()
    try:
        for index in range(calls):
            c = opened[index % connections]
            stream = c.conn.get_next_available_stream_id()
            c.conn.send_headers(stream, _headers(path, metadata or []))
            c.calls[stream] = _Call(struct.pack(">BI", 0, message_bytes), message_bytes)
        for c in opened:
            selector.register(c.sock, selectors.EVENT_READ, c)
            _flush(c)
        deadline = time.monotonic() + within
        while any(call.status is None for c in opened for call in c.calls.values()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"calls still open after {within} s")
            for c in opened:
                _push(c)
                _flush(c)
            for key, _ in selector.select(timeout=0.01):
                _take(key.data)
                _flush(key.data)  # ping and settings acks, window updates
        return [call.status or "" for c in opened for call in c.calls.values()]
    finally:
        selector.close()
        for c in opened:
            c.sock.close()
