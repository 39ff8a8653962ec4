"""HTTP/2 keepalive: the server pings its connections, and a peer silent past a bound loses them.

A Work stream is the heartbeat of the leases it holds (usecases/streams.py),
but an open stream proves nothing by itself: a path can go silent with no
FIN and no RST (a partition, a NAT that dropped its state, a frozen VM), and
a stream without credit sends nothing, so TCP never notices. A review saw a
silent worker keep its events leased for an hour (the connection's age).

So the server pings every connection every `INBOXD_KEEPALIVE_TIME` and closes
one whose ping is not answered within `INBOXD_KEEPALIVE_TIMEOUT`; its streams
end with it, and a Work stream's end hands its events on at once. With
grpcio 1.85 the keepalive timeout alone did not close a silent connection
(one ping, then nothing): `grpc.http2.ping_timeout_ms` must say it too. The
stream of a peer silent since some moment ends within
`Settings.silent_peer_bound` (2 x time + timeout, 15 s by default): the next
ping is due within one period, grpc may put it off one more when data came
in, and then it waits the timeout. Measured: time + timeout.

Clients ping too (both runtimes do, every 10 s by default), to learn that
their own path went silent. grpc answers a client that pings more often than
the server permits with GOAWAY `too_many_pings`, which closes the connection
and every stream on it: the server permits a ping every
`MIN_CLIENT_PING_INTERVAL` (or every `INBOXD_KEEPALIVE_TIME`, if shorter),
with or without calls in flight.
"""

from __future__ import annotations

from datetime import timedelta

from inboxd.config.settings import Settings

# The most often a client may ping without data flowing: half the runtimes' 10 s, for their timers' jitter.
MIN_CLIENT_PING_INTERVAL = timedelta(seconds=5)


def client_ping_interval(settings: Settings) -> timedelta:
    """How often a client may ping without being told `too_many_pings`."""
    return min(MIN_CLIENT_PING_INTERVAL, settings.keepalive_time)


def keepalive_options(settings: Settings) -> list[tuple[str, int]]:
    """grpc server options: ping every connection, close a silent one, and let clients ping too."""
    timeout = _ms(settings.keepalive_timeout)
    return [
        ("grpc.keepalive_time_ms", _ms(settings.keepalive_time)),
        ("grpc.keepalive_timeout_ms", timeout),
        # Without it a silent connection stayed open (grpcio 1.85; see the module's docstring).
        ("grpc.http2.ping_timeout_ms", timeout),
        # A quiet Work stream sends no data: keep pinging it all the same.
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_recv_ping_interval_without_data_ms", _ms(client_ping_interval(settings))),
    ]


def _ms(value: timedelta) -> int:
    return round(value.total_seconds() * 1000)
