"""The worker's INFO lines on stderr when the application set up no logging of its own."""

from __future__ import annotations

import logging

from inboxd_client import tracing

PACKAGE_LOGGER = "inboxd_client"
_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s%(trace_ids)s"


class TraceLogFilter(logging.Filter):
    """Gives each record `trace_id` and `span_id` (hex, "" outside a recording span) and `trace_ids` (" trace_id=...
    span_id=..." or ""), so a line logged while a worker's span is current names its trace.

    Ours is on the default handler; an application with logging of its own adds it
    to its handler (`handler.addFilter(TraceLogFilter())`) and formats `%(trace_id)s`.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        ids = None
        if tracing.TRACER is not None:  # off: no OpenTelemetry call at all
            from inboxd_client.worker_spans import log_ids

            ids = log_ids()
        record.trace_id, record.span_id = ids or ("", "")
        record.trace_ids = f" trace_id={ids[0]} span_id={ids[1]}" if ids else ""
        return True


class _DefaultHandler(logging.StreamHandler):  # type: ignore[type-arg]  # StreamHandler is generic in typeshed
    """Ours: recognised, so it is added once and never beside a handler the application installed."""


def log_by_default() -> None:
    """Gives inboxd_client's loggers a stderr handler at INFO, unless the application configured logging.

    Python shows only warnings by default, so a worker that starts, works and
    stops said nothing; a line per start, stop and failure (never one per
    event) is what someone running the README's ten lines expects to see.
    An application that configured logging (a root handler, or one on
    `inboxd_client`) before `run()` keeps full control: nothing is added.
    """
    package = logging.getLogger(PACKAGE_LOGGER)
    if logging.getLogger().handlers or package.handlers:
        return
    handler = _DefaultHandler()
    handler.setFormatter(logging.Formatter(_FORMAT))
    handler.addFilter(TraceLogFilter())
    package.addHandler(handler)
    if package.level == logging.NOTSET:
        package.setLevel(logging.INFO)
