"""What flow control lets a stranger send: a stream window of HTTP/2's 64 KiB, however busy the connection.

A refused call's body is never read (api/admission.py), but what HTTP/2 flow
control already let in is buffered all the same: the stream window the server
announces, per stream. grpc's BDP probing, on by default, grows that window
from 64 KiB to megabytes on a connection that carries data (32 MiB here,
before the fix; grpc aims high when nothing reports memory pressure, and
nothing does without a resource quota), so 32 strangers could make a server
hold far above issue 26's 100 MB: fresh-clone CI runs saw 133 and 139 MB. The server turns BDP probing off
(serving/server.py). Here a client speaking HTTP/2 itself (the h2 library)
counts every byte of window the server ever grants a stream, while it pushes
megabytes of refused bodies down one connection and answers the server's
pings, as a BDP estimate needs.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import h2.config
import h2.connection
import h2.events
import h2.settings

from inboxd.config.tokens import Scope, entry_toml, new_token
from tests.harness import ServerProcess

KiB = 1024
# HTTP/2's own initial stream window (RFC 9113, 6.9.2).
DEFAULT_STREAM_WINDOW = 65_535
STREAMS = 200
PUSHED_BYTES = 24 * 1024 * KiB
STRANGER_HEADERS = [
    (":method", "POST"),
    (":scheme", "http"),
    (":authority", "inboxd"),
    (":path", "/inboxd.v1.InboxService/AcceptBatch"),
    ("content-type", "application/grpc"),
    ("te", "trailers"),
]


def _open(port: int) -> tuple[socket.socket, h2.connection.H2Connection]:
    sock = socket.create_connection(("127.0.0.1", port), timeout=0.05)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    # Our receive window is not what is measured: wide open, so the server's answers never wait.
    conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 2**31 - 1})
    conn.increment_flow_control_window(2**30)
    sock.sendall(conn.data_to_send())
    return sock, conn


def test_the_server_grants_a_refused_stream_no_more_than_the_default_window(migrated_url: str, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(entry_toml("edge", new_token(), [Scope.ACCEPT], ["*"]))
    server = ServerProcess(database_url=migrated_url, env={"INBOXD_TOKENS_FILE": str(tokens)}).start()
    widest_setting = DEFAULT_STREAM_WINDOW
    widest_granted = 0  # the most window any one stream was ever given: at its opening, plus its updates
    pushed = opened = 0
    try:
        sock, conn = _open(server.port)
        live: dict[int, int] = {}  # stream -> window granted so far
        deadline = time.monotonic() + 30
        while (pushed < PUSHED_BYTES or opened < STREAMS) and time.monotonic() < deadline:
            while len(live) < 4:  # a new stranger (no token) for each one the server refused
                stream = conn.get_next_available_stream_id()
                conn.send_headers(stream, STRANGER_HEADERS)
                live[stream] = conn.local_flow_control_window(stream)
                opened += 1
            for stream in list(live):
                room = min(conn.local_flow_control_window(stream), conn.max_outbound_frame_size)
                if room > 0:
                    conn.send_data(stream, b"\x0a" * room)
                    pushed += room
            sock.sendall(conn.data_to_send())
            try:
                data = sock.recv(1 << 16)
            except TimeoutError:
                data = b""
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.RemoteSettingsChanged):
                    changed = event.changed_settings.get(h2.settings.SettingCodes.INITIAL_WINDOW_SIZE)
                    if changed is not None:
                        widest_setting = max(widest_setting, changed.new_value)
                elif isinstance(event, h2.events.WindowUpdated) and event.stream_id in live:
                    live[event.stream_id] += event.delta
                elif isinstance(event, h2.events.StreamEnded | h2.events.StreamReset):
                    live.pop(event.stream_id, None)
            widest_granted = max(widest_granted, *live.values()) if live else widest_granted
            sock.sendall(conn.data_to_send())  # ping acks, settings acks
        sock.close()
    finally:
        server.kill()
    assert pushed >= PUSHED_BYTES, f"only {pushed} bytes pushed: the server stopped granting windows"
    assert widest_setting <= DEFAULT_STREAM_WINDOW, f"the server raised its initial stream window to {widest_setting}"
    assert widest_granted <= DEFAULT_STREAM_WINDOW, f"a refused stream was granted {widest_granted} bytes"
