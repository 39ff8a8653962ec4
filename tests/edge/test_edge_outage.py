"""The edge when inboxd is gone or silent: 503, never 2xx, and nothing stored."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest

from inboxd.store.database import Database
from inboxd_edge.config import config_from_data
from inboxd_edge.serve import start_edge
from tests.edge.rig import as_body, post, routes_config, sign_standard, std_account, stored_events
from tests.harness import ServerProcess


@pytest.fixture
async def inboxd_process(migrated_url: str) -> AsyncIterator[ServerProcess]:
    """An inboxd of this test's own, in a process the test can kill."""
    proc = await asyncio.to_thread(ServerProcess(migrated_url).start)
    try:
        yield proc
    finally:
        proc.kill()


async def test_with_inboxd_stopped_the_edge_answers_503_and_stores_nothing(
    inboxd_process: ServerProcess, http: aiohttp.ClientSession, db: Database
) -> None:
    edge = await start_edge(config_from_data(routes_config(inboxd_process.target), {}), listen="127.0.0.1:0")
    try:
        acct = std_account()
        url = f"{edge.url}/hooks/std/{acct}"
        before = as_body({"type": "invoice.paid", "n": 1})
        assert (await post(http, url, before, sign_standard(before, "before", account=acct))).status == 200
        inboxd_process.kill()
        during = as_body({"type": "invoice.paid", "n": 2})
        reply = await post(http, url, during, sign_standard(during, "during", account=acct))
        assert (reply.status, reply.outcome) == (503, "unavailable")
        assert set(await stored_events(db, f"std/{acct}")) == {"before"}
    finally:
        await edge.stop()


@pytest.mark.parametrize("accept_mode", ["auto", "unary"])
async def test_an_inboxd_that_never_answers_gets_503_when_the_deadline_passes(
    http: aiohttp.ClientSession, db: Database, accept_mode: str
) -> None:
    # A TCP listener that accepts and then says nothing: the Accept can only time out.
    held: list[asyncio.StreamWriter] = []

    async def hold(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    silent = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = silent.sockets[0].getsockname()[1]
    edge = await start_edge(
        config_from_data(routes_config(f"127.0.0.1:{port}", deadline=0.5, accept_mode=accept_mode), {}),
        listen="127.0.0.1:0",
    )
    try:
        acct = std_account()
        body = as_body({"type": "invoice.paid"})
        reply = await post(http, f"{edge.url}/hooks/std/{acct}", body, sign_standard(body, "m", account=acct))
        assert (reply.status, reply.outcome) == (503, "deadline_exceeded")
        assert await stored_events(db, f"std/{acct}") == {}
    finally:
        await edge.stop()
        for writer in held:
            writer.close()
        silent.close()
        await silent.wait_closed()
