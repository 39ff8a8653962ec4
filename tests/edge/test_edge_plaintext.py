"""The edge refuses to send inboxd's bearer token in plaintext beyond loopback, unless told the network is trusted.

0.0.0.0 is "beyond loopback" by address yet reaches this machine only, so no test traffic leaves it.
"""

from __future__ import annotations

from typing import Any

import pytest

from inboxd.serving.server import RunningServer
from inboxd_edge.config import ConfigError, config_from_data
from inboxd_edge.serve import start_edge
from tests.edge.rig import routes_config


def beyond_loopback(server: RunningServer, **inboxd: Any) -> dict[str, Any]:
    data = routes_config(f"0.0.0.0:{server.port}")
    data["inboxd"].update(inboxd)
    return data


async def test_a_token_for_a_remote_target_without_a_ca_is_refused_at_start(server: RunningServer) -> None:
    config = config_from_data(beyond_loopback(server), {})
    with pytest.raises(ConfigError, match=r"plaintext to 0\.0\.0\.0:\d+.*INBOXD_TRUSTED_NETWORK") as refused:
        await start_edge(config, listen="127.0.0.1:0", environ={"INBOXD_TOKEN": "edge-s3cret"})
    assert "edge-s3cret" not in str(refused.value)


@pytest.mark.parametrize(
    ("inboxd", "environ"),
    [
        ({"trusted_network": True}, {"INBOXD_TOKEN": "t"}),
        ({}, {"INBOXD_TOKEN": "t", "INBOXD_TRUSTED_NETWORK": "1"}),
        ({}, {}),
    ],
    ids=["trusted in the file", "trusted by the server's variable", "no token"],
)
async def test_the_override_or_no_token_lets_the_edge_start(
    server: RunningServer, inboxd: dict[str, Any], environ: dict[str, str]
) -> None:
    edge = await start_edge(
        config_from_data(beyond_loopback(server, **inboxd), {}), listen="127.0.0.1:0", environ=environ
    )
    await edge.stop()


def test_trusted_network_must_be_a_boolean() -> None:
    with pytest.raises(ConfigError, match="trusted_network must be true or false"):
        config_from_data({**routes_config("127.0.0.1:1"), "inboxd": {"trusted_network": "yes"}}, {})
