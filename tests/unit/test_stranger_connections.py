"""A connection that no valid token used is shut down after its bound; one a token used stays.

Real sockets, accepted by this very process (the rule finds a connection among
its own descriptors), and a clock passed in: nothing sleeps.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from inboxd.serving.stranger_connections import StrangerConnections, peer_name

BOUND = 30.0


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server


def _connect(listener: socket.socket) -> tuple[socket.socket, socket.socket, str]:
    client = socket.create_connection(listener.getsockname(), timeout=5)
    accepted, _ = listener.accept()
    return client, accepted, peer_name(socket.AF_INET, client.getsockname())


def _closed_by_server(client: socket.socket) -> bool:
    client.settimeout(5)
    return client.recv(1) == b""


def test_a_connection_with_only_tokenless_calls_is_shut_down_after_its_bound_and_not_before(
    listener: socket.socket,
) -> None:
    now = [0.0]
    rule = StrangerConnections(listener.getsockname()[1], BOUND, clock=lambda: now[0])
    client, accepted, peer = _connect(listener)
    with client, accepted:
        rule.seen(peer, vouched=False)
        now[0] = BOUND - 1
        assert rule.sweep() == 0
        rule.seen(peer, vouched=False)  # more tokenless calls do not move its start
        now[0] = BOUND
        assert rule.sweep() == 1
        assert _closed_by_server(client)


def test_a_connection_that_carried_a_call_with_a_token_is_left_open(listener: socket.socket) -> None:
    now = [0.0]
    rule = StrangerConnections(listener.getsockname()[1], BOUND, clock=lambda: now[0])
    client, accepted, peer = _connect(listener)
    stranger, stranger_accepted, stranger_peer = _connect(listener)
    with client, accepted, stranger, stranger_accepted:
        rule.seen(peer, vouched=False)  # a health Watch first, say, then its real calls
        rule.seen(peer, vouched=True)
        rule.seen(stranger_peer, vouched=False)
        now[0] = 10 * BOUND
        assert rule.sweep() == 1
        assert _closed_by_server(stranger)
        client.settimeout(0.2)
        with pytest.raises(TimeoutError):
            client.recv(1)  # still open: nothing to read, and no end either


@pytest.mark.parametrize(
    ("family", "address", "expected"),
    [
        (socket.AF_INET, ("127.0.0.1", 5000), "ipv4:127.0.0.1:5000"),
        (socket.AF_INET6, ("::1", 5000, 0, 0), "ipv6:[::1]:5000"),
        (socket.AF_INET6, ("::ffff:10.0.0.7", 5000, 0, 0), "ipv4:10.0.0.7:5000"),
    ],
)
def test_a_connection_is_named_as_grpc_names_its_peer(
    family: int, address: tuple[str, int] | tuple[str, int, int, int], expected: str
) -> None:
    assert peer_name(family, address) == expected
