"""The event loop `inboxd serve` runs on: uvloop where it is installed, else asyncio's own.

Every gRPC call is a few callbacks on this loop, and the server's main thread
is where a busy inboxd spends its CPU. INBOXD_EVENT_LOOP=asyncio chooses the
standard loop (to rule the loop out when chasing a problem, say). It is read
from the environment, not the settings, because a `--workers` child builds
its loop before it reads its settings from the parent; it inherits the
parent's environment.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from inboxd.config.settings import ConfigError

T = TypeVar("T")
CHOICES = ("uvloop", "asyncio")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The factory for the chosen loop; None: asyncio's default."""
    choice = os.environ.get("INBOXD_EVENT_LOOP", "uvloop")
    if choice not in CHOICES:
        raise ConfigError(f"INBOXD_EVENT_LOOP must be one of {', '.join(CHOICES)}, not {choice!r}")
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:  # not built for this platform: the standard loop serves the same
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    try:
        factory = loop_factory()
    except ConfigError:
        main.close()  # never to run: no "never awaited" warning beside the error
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
