"""Clients refuse to send a bearer token in plaintext beyond loopback, with the server's own override.

0.0.0.0 stands for "beyond loopback" here: by address it is not loopback (the
server's own listen check says the same), yet Linux delivers a connection to it
on this machine, so no test traffic leaves the host either way.
"""

from __future__ import annotations

import pytest

from inboxd.serving.server import RunningServer
from inboxd_client.plaintext import PlaintextTokenRefused, is_loopback_target, refuse_plaintext_token
from tests.integration.admin_fixtures import run_cli


@pytest.mark.parametrize(
    ("target", "loopback"),
    [
        ("127.0.0.1:50051", True),
        ("127.8.9.10:1", True),
        ("localhost:50051", True),
        ("LOCALHOST:50051", True),
        ("[::1]:50051", True),
        ("::1", True),
        ("unix:/run/inboxd.sock", True),
        ("dns:///localhost:50051", True),
        ("0.0.0.0:50051", False),
        ("10.1.2.3:50051", False),
        ("inboxd.internal:50051", False),
        ("localhost.example.com:50051", False),
        ("[2001:db8::1]:50051", False),
    ],
)
def test_a_target_is_loopback_only_by_its_address_or_the_name_localhost(target: str, loopback: bool) -> None:
    assert is_loopback_target(target) is loopback


def test_a_token_beyond_loopback_needs_tls_or_the_trusted_network_override() -> None:
    with pytest.raises(PlaintextTokenRefused, match=r"plaintext to inboxd\.internal:1.*INBOXD_TRUSTED_NETWORK"):
        refuse_plaintext_token("inboxd.internal:1", token="t", tls=False, trusted_network=False)
    refuse_plaintext_token("inboxd.internal:1", token="t", tls=True, trusted_network=False)
    refuse_plaintext_token("inboxd.internal:1", token="t", tls=False, trusted_network=True)
    refuse_plaintext_token("inboxd.internal:1", token=None, tls=False, trusted_network=False)
    refuse_plaintext_token("127.0.0.1:1", token="t", tls=False, trusted_network=False)


async def test_the_admin_cli_refuses_a_plaintext_token_beyond_loopback_before_it_connects(
    clocked_server: RunningServer,
) -> None:
    beyond = f"0.0.0.0:{clocked_server.port}"
    refused = await run_cli("stats", "--target", beyond, "--token", "s3cret")
    assert refused.code == 2
    assert "refusing to send a bearer token in plaintext to 0.0.0.0" in refused.stderr
    assert "s3cret" not in refused.stderr + refused.stdout
    # The same call with the server's override, or with no token at all, goes through.
    trusted = await run_cli("stats", "--target", beyond, "--token", "s3cret", "--trusted-network")
    assert trusted.code == 0, trusted.stderr
    by_env = await run_cli("stats", "--target", beyond, "--token", "s3cret", env={"INBOXD_TRUSTED_NETWORK": "1"})
    assert by_env.code == 0, by_env.stderr
    assert (await run_cli("stats", "--target", beyond)).code == 0
