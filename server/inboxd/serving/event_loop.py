"""The event loop `inboxd serve` runs on: asyncio's own, or uvloop on request.

INBOXD_EVENT_LOOP=uvloop runs the server on uvloop (`pip install uvloop`).
It is not the default because it did not make inboxd faster. Measured on the
2-core bench machine on 2026-12-01, in alternating runs outside `make bench`
(the server under the Node load generator, asyncio against uvloop): uvloop
served the empty RPC at 64 callers 8% faster, but Accept at 64 callers at
the same rate (3,237 against 3,226 /s, 5% less server CPU per call), and
Accept at 16 callers 5% slower, in smaller groups. It is read from the
environment, not the settings, because a `--workers` child builds its loop
before it reads its settings from the parent; it inherits the parent's
environment.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from inboxd.config.settings import ConfigError

T = TypeVar("T")
CHOICES = ("asyncio", "uvloop")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The factory for the chosen loop; None: asyncio's default."""
    choice = os.environ.get("INBOXD_EVENT_LOOP", "asyncio")
    if choice not in CHOICES:
        raise ConfigError(f"INBOXD_EVENT_LOOP must be one of {', '.join(CHOICES)}, not {choice!r}")
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        raise ConfigError("INBOXD_EVENT_LOOP=uvloop, but uvloop is not installed (pip install uvloop)") from None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    try:
        factory = loop_factory()
    except ConfigError:
        main.close()  # never to run: no "never awaited" warning beside the error
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
