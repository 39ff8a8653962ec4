"""The keepalive settings: the bound a silent peer gets, and pings the runtimes may send without a GOAWAY."""

from __future__ import annotations

from datetime import timedelta

import pytest

from inboxd.config.settings import ConfigError, Settings, load_settings
from inboxd.serving.keepalive import client_ping_interval, keepalive_options
from inboxd.serving.server import server_options
from inboxd_client import connection


def test_a_silent_peer_is_bounded_at_20_seconds_by_default() -> None:
    assert Settings().silent_peer_bound <= timedelta(seconds=20)


def test_the_server_closes_a_silent_connection_by_the_ping_timeout_as_well() -> None:
    options = dict(server_options(Settings()))
    # grpcio 1.85 kept a silent connection open on keepalive_timeout_ms alone.
    assert options["grpc.http2.ping_timeout_ms"] == options["grpc.keepalive_timeout_ms"] == 5000
    assert options["grpc.keepalive_time_ms"] == 5000


def test_the_python_runtime_pings_no_more_often_than_the_server_permits() -> None:
    permitted = client_ping_interval(Settings())
    assert timedelta(milliseconds=connection.KEEPALIVE_TIME_MS) >= 2 * permitted
    options = dict(keepalive_options(Settings()))
    assert options["grpc.http2.min_recv_ping_interval_without_data_ms"] == permitted / timedelta(milliseconds=1)
    assert options["grpc.keepalive_permit_without_calls"] == 1
    client = dict(connection.channel_options(None, None))
    assert client["grpc.http2.ping_timeout_ms"] == client["grpc.keepalive_timeout_ms"]


def test_a_caller_may_set_its_own_keepalive() -> None:
    client = dict(connection.channel_options(None, None, [("grpc.keepalive_time_ms", 60_000)]))
    assert client["grpc.keepalive_time_ms"] == 60_000


@pytest.mark.parametrize("name", ["INBOXD_KEEPALIVE_TIME", "INBOXD_KEEPALIVE_TIMEOUT"])
def test_a_keepalive_of_nothing_is_refused(name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        load_settings({name: "0s"})
