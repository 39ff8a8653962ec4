"""Fixtures for the console's tests: one real inboxd with its console, and one headless Chromium."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest
from playwright.async_api import Browser, BrowserContext, Page, async_playwright

from inboxd.config.settings import Settings
from inboxd.config.tokens import TokenRegistry
from inboxd.serving.server import start_server
from inboxd.store.database import Database
from tests.conftest import NO_RESCUER
from tests.console.rig import CHROMIUM, CHROMIUM_ARGS, Rig, unique_tenants, write_tokens


@pytest.fixture(scope="module")
async def rig(db: Database, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Rig]:
    shop, other = unique_tenants()
    tokens = write_tokens(tmp_path_factory.mktemp("console") / "tokens.toml", shop)
    settings = Settings(
        rescue_interval=NO_RESCUER, listen="127.0.0.1:0", console_listen="127.0.0.1:0", tokens_file=tokens.file
    )
    registry = TokenRegistry(tokens.file)
    running = await start_server(settings, db, registry=registry)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        yield Rig(running, tokens, registry, channel, shop=shop, other=other)
    await running.stop(1.0)


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/install-chromium.sh (as root), or make setup")
    async with async_playwright() as playwright:
        # Playwright gives each launch a fresh, empty profile (--user-data-dir) of its own.
        launched = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        await launched.close()


@pytest.fixture
async def context(browser: Browser, rig: Rig) -> AsyncIterator[BrowserContext]:
    """A fresh browser profile's worth of cookies per test."""
    ctx = await browser.new_context(base_url=rig.base, viewport={"width": 1280, "height": 900})
    ctx.set_default_timeout(10_000)
    yield ctx
    await ctx.close()


@pytest.fixture
async def page(context: BrowserContext) -> AsyncIterator[Page]:
    yield await context.new_page()
