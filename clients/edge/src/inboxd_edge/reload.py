"""SIGHUP: read the routes file again; a valid one replaces the routes at once, an invalid one is refused.

Before, SIGHUP's default action killed the edge. Now the file is read and
checked as at start (every route, secret and identity rule); only then is the
new routes application swapped in, so a provider never meets a half-loaded
file. A refused file is one ERROR line naming what is wrong, and the routes
in force stay. `[inboxd]`, `[edge] listen`, `[limits]`, `[metrics]` and `[log]`
are read at start only: a reload that changes them says so and keeps them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from inboxd_edge import edge_metrics
from inboxd_edge.config import ConfigError, EdgeConfig, load_config
from inboxd_edge.serve import RunningEdge, routes_runner

log = logging.getLogger("inboxd_edge")


class RouteReloader:
    """Reloads `path` into `edge`, one reload at a time; `config` is what the edge runs now."""

    def __init__(
        self, edge: RunningEdge, path: Path, config: EdgeConfig, environ: Mapping[str, str] = os.environ
    ) -> None:
        self.edge = edge
        self.path = path
        self.config = config
        self.environ = environ
        self._lock = asyncio.Lock()

    async def reload(self) -> bool:
        """True when the new routes are in force; False (and an ERROR line) when the file was refused."""
        async with self._lock:
            try:
                new = await asyncio.to_thread(load_config, self.path, self.environ)
            except ConfigError as exc:
                edge_metrics.count_reload("refused")
                log.error("routes file %s not reloaded, the %d routes in force stay: %s", self.path,
                          len(self.config.routes), exc)  # fmt: skip
                return False
            kept = _kept_at_start(self.config, new)
            new = replace(new, listen=self.config.listen, inboxd=self.config.inboxd, ops=self.config.ops)
            front, build = self.edge.front, self.edge.build
            assert front is not None and build is not None
            await front.swap(await routes_runner(build(new)))
            self.config = new
            edge_metrics.count_reload("applied")
            log.info(
                "routes file %s reloaded: %d routes (%s)%s",
                self.path,
                len(new.routes),
                ", ".join(r.name for r in new.routes),
                f"; {', '.join(kept)} changed and take effect at the next restart" if kept else "",
            )
            return True

    def install(self) -> None:
        """Reloads on each SIGHUP from now on."""
        loop = asyncio.get_running_loop()
        tasks: set[asyncio.Task[bool]] = set()

        def on_sighup() -> None:
            task = loop.create_task(self.reload())
            tasks.add(task)
            task.add_done_callback(tasks.discard)

        loop.add_signal_handler(signal.SIGHUP, on_sighup)


def _kept_at_start(old: EdgeConfig, new: EdgeConfig) -> list[str]:
    """The tables read at start only that the new file changes."""
    kept = []
    if new.listen != old.listen:
        kept.append("[edge] listen")
    if new.inboxd != old.inboxd:
        kept.append("[inboxd]")
    if new.ops != old.ops:
        kept.append("[limits]/[metrics]/[log]")
    return kept
