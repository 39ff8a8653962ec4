"""inboxd refusing the edge's own token is named apart from a provider's bad signature, and logged as an error."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from inboxd.config.settings import Settings
from inboxd.config.tokens import TokenRegistry
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd_edge.config import config_from_data
from inboxd_edge.serve import start_edge
from tests.edge.rig import as_body, post, routes_config, sign_standard, std_account
from tests.integration.test_auth import Tokens, write_tokens


@pytest.fixture(scope="module")
def tokens(tmp_path_factory: pytest.TempPathFactory) -> Tokens:
    return write_tokens(tmp_path_factory.mktemp("tokens") / "tokens.toml")


@pytest.fixture(scope="module")
async def guarded(settings: Settings, db: Database, tokens: Tokens) -> AsyncIterator[RunningServer]:
    running = await start_server(settings, db, registry=TokenRegistry(tokens.file))
    yield running
    await running.stop(1.0)


async def _deliver_through_edge(server: RunningServer, token: str, *, signed: bool = True) -> tuple[int, str]:
    edge = await start_edge(
        config_from_data(routes_config(f"127.0.0.1:{server.port}"), {}),
        listen="127.0.0.1:0",
        environ={"INBOXD_TOKEN": token},
    )
    account = std_account()
    body = as_body({"type": "invoice.paid", "id": "in_1"})
    headers = sign_standard(body, "msg_refused", account=account)
    if not signed:
        headers["webhook-signature"] = "v1,AAAA"
    try:
        async with aiohttp.ClientSession() as http:
            reply = await post(http, f"http://127.0.0.1:{edge.port}/hooks/std/{account}", body, headers)
    finally:
        await edge.stop()
    return reply.status, reply.outcome


async def test_a_token_inboxd_does_not_know_is_the_edges_fault_logged_as_an_error(
    guarded: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="inboxd_edge"):
        assert await _deliver_through_edge(guarded, "not-a-token") == (500, "edge_unauthenticated")
    lines = [r for r in caplog.records if 'outcome="edge_unauthenticated"' in r.getMessage()]
    assert lines and all(r.levelno == logging.ERROR for r in lines)


async def test_a_token_without_the_namespace_is_the_edges_fault_too(guarded: RunningServer, tokens: Tokens) -> None:
    # edge-a may accept into tenant-a/* only; the std route's namespace is std/<account>.
    assert await _deliver_through_edge(guarded, tokens.edge_a) == (500, "edge_permission_denied")


async def test_a_bad_signature_is_still_the_providers_401_at_info(
    guarded: RunningServer, tokens: Tokens, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="inboxd_edge"):
        assert await _deliver_through_edge(guarded, tokens.root, signed=False) == (401, "unauthenticated")
    lines = [r for r in caplog.records if 'outcome="unauthenticated"' in r.getMessage()]
    assert lines and all(r.levelno == logging.INFO for r in lines)


def test_the_readme_names_the_edges_own_refusals() -> None:
    readme = (Path(__file__).resolve().parents[2] / "clients/edge/README.md").read_text()
    assert "edge_unauthenticated" in readme and "edge_permission_denied" in readme
