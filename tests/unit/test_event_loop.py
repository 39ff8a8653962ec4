"""Which event loop `inboxd serve` runs on."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from inboxd.config.settings import ConfigError
from inboxd.serving import event_loop


def test_asyncio_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("INBOXD_EVENT_LOOP", raising=False)
    assert event_loop.loop_factory() is None


def test_uvloop_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INBOXD_EVENT_LOOP", "uvloop")
    assert event_loop.loop_factory() is uvloop.new_event_loop

    async def which() -> type[asyncio.AbstractEventLoop]:
        return type(asyncio.get_running_loop())

    assert event_loop.run(which()) is uvloop.Loop


def test_anything_else_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INBOXD_EVENT_LOOP", "trio")
    with pytest.raises(ConfigError, match="INBOXD_EVENT_LOOP must be one of asyncio, uvloop, not 'trio'"):
        event_loop.loop_factory()
