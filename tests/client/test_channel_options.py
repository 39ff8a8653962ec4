"""The channel options a client is built with: its defaults, and the caller's own taking their place."""

from __future__ import annotations

from inboxd_client.connection import RetryPolicy, channel_options


def test_a_client_channel_receives_any_size_by_default() -> None:
    options = dict(channel_options(RetryPolicy(), None))
    assert options["grpc.max_receive_message_length"] == -1


def test_a_callers_option_replaces_the_clients_default_of_the_same_name() -> None:
    # gRPC honours the first of two settings of one name, so a default left in
    # front would silently win over the caller's.
    options = channel_options(RetryPolicy(), None, [("grpc.max_receive_message_length", 65536), ("grpc.x", 1)])
    names = [name for name, _ in options]
    assert names.count("grpc.max_receive_message_length") == 1
    assert dict(options)["grpc.max_receive_message_length"] == 65536
    assert ("grpc.x", 1) in options
