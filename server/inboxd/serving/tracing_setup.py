"""Tracing for a server process: its plan read once from the `OTEL_*` variables, started before anything serves.

A variable inboxd cannot honour (an unknown exporter, a protocol whose
package is missing) refuses the start, as a bad setting does: a server that
was asked to trace must not serve untraced without anyone noticing.
"""

from __future__ import annotations

import asyncio
import logging

from inboxd.config.settings import ConfigError
from inboxd.observability import tracing

log = logging.getLogger("inboxd")


def start_process_tracing() -> None:
    """Starts this process's tracer when the variables say on; raises ConfigError naming a bad variable."""
    try:
        plan = tracing.tracing_plan()
    except tracing.TracingSettingsError as exc:
        raise ConfigError(str(exc)) from None
    if plan is None:
        return
    tracing.start_tracing(plan)
    protocol = f" (OTLP over {plan.protocol})" if "otlp" in plan.exporters else ""
    log.info("tracing on: spans exported with %s%s", ", ".join(plan.exporters), protocol)


async def stop_process_tracing() -> None:
    """Flushes the spans still held and stops the exporters (in a thread: an export may wait on its endpoint)."""
    if tracing.TRACER is not None:
        await asyncio.to_thread(tracing.stop_tracing)
