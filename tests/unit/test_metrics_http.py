"""INBOXD_METRICS_LISTEN parsing."""

from __future__ import annotations

import pytest

from inboxd.observability.metrics_http import split_listen


@pytest.mark.parametrize(
    ("listen", "expected"),
    [("127.0.0.1:9464", ("127.0.0.1", 9464)), ("[::1]:0", ("::1", 0)), (":9464", (None, 9464))],
)
def test_listen_addresses_split_into_host_and_port(listen: str, expected: tuple[str | None, int]) -> None:
    assert split_listen(listen) == expected


@pytest.mark.parametrize("listen", ["9464", "host:", "host:port"])
def test_a_listen_address_without_a_port_is_refused(listen: str) -> None:
    with pytest.raises(ValueError, match="host and a port"):
        split_listen(listen)
