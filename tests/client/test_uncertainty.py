"""Which errors inside an action say "the remote side may have acted" (UNKNOWN) and which say it did not (FAILED)."""

from __future__ import annotations

import asyncio
import http.client
import io
import socket
import urllib.error

import pytest

from inboxd_client import UncertainOutcome
from inboxd_client.actions import is_uncertain


def http_error(status: int) -> urllib.error.HTTPError:
    return urllib.error.HTTPError(
        "http://api.test/v1/messages", status, "status", http.client.HTTPMessage(), io.BytesIO()
    )


class GatewayError(Exception):
    pass


@pytest.mark.parametrize(
    ("error", "uncertain"),
    [
        (TimeoutError(), True),
        (TimeoutError(), True),
        (ConnectionResetError(), True),
        (socket.gaierror(), True),
        (urllib.error.URLError("timed out"), True),
        (http.client.RemoteDisconnected("Remote end closed connection"), True),
        (http.client.IncompleteRead(b""), True),
        (http_error(502), True),
        (http_error(400), False),
        (http_error(429), False),
        (UncertainOutcome("gateway answered 504"), True),
        (asyncio.CancelledError(), True),
        (ValueError("bad address"), False),
        (KeyError("id"), False),
    ],
    ids=repr,
)
def test_an_error_counts_as_uncertain_only_if_the_remote_side_may_have_acted(
    error: BaseException, uncertain: bool
) -> None:
    assert is_uncertain(error) is uncertain


def test_a_user_can_mark_an_error_class_uncertain() -> None:
    assert not is_uncertain(GatewayError())
    assert is_uncertain(GatewayError(), (GatewayError,))
