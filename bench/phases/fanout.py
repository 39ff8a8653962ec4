"""Subscriptions (fan-out at accept): Accept at 64 callers with three subscriptions on its namespace ÷ without.

The figure counts events accepted (the callers' Accepts answered), not the
copies. The subscriptions are written straight into inbox_subscriptions, as
CreateSubscription writes them, and removed after the figure (in `finally`),
so no later phase's Accepts copy anything. Windows alternate A B B A
(none, three) on one namespace, each with keys of its own; each figure is
the combination of its two windows.
"""

from __future__ import annotations

import logging
from typing import Any, LiteralString

from bench.cluster import checkpoint, execute
from bench.record import combined
from bench.run import Run

log = logging.getLogger("bench")

FANOUT_NS = "bench/fanout"
NONE = "fanout.accept.none"
THREE = "fanout.accept.three"
CALLERS = 64

SUBSCRIBE: LiteralString = """
    INSERT INTO inbox_subscriptions (name, namespace_pattern, like_pattern, created_at, created_by)
    SELECT 'bench-sub-' || n, 'bench/fanout', 'bench/fanout', now(), 'bench'
    FROM generate_series(1, 3) AS n
"""
UNSUBSCRIBE: LiteralString = "DELETE FROM inbox_subscriptions WHERE name LIKE 'bench-sub-%'"


async def fanout_phase(run: Run) -> None:
    windows: dict[str, list[dict[str, Any]]] = {NONE: [], THREE: []}
    try:
        for i, name in enumerate((NONE, THREE, THREE, NONE)):
            await execute(run.url, UNSUBSCRIBE)
            if name == THREE:
                await execute(run.url, SUBSCRIBE)
            load = run.node("accept", CALLERS, namespace=FANOUT_NS, prefix=f"fanout-{i}")
            await run.measure_node(f"{name}.w{i}", load, "tx/s")
            windows[name].append(run.figures.pop(f"{name}.w{i}"))
    finally:
        await execute(run.url, UNSUBSCRIBE)
    for name, measured in windows.items():
        run.figures[f"{name}.c{CALLERS}"] = combined(measured)
    await checkpoint(run.url)
