"""Structured logs: JSON lines for machines, logfmt when a person watches a terminal.

A record's structured fields travel in `extra={"fields": {...}}` (see
`log_fields`). While tracing is on and a span is recording, a line carries
its `trace_id` and `span_id`, to go from a line to its trace and back. What
never goes into a log line: payloads, claim tokens,
bearer tokens, and raw event keys, which may carry email addresses; an
event is named by `event_ref`, a short hash of its identity.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, TextIO

from opentelemetry import trace

from inboxd.domain.unprintable import UNPRINTABLE, escape_unprintable
from inboxd.observability import tracing

# Fields every record has (the span's two while one records); the rest of a line is the record's own fields.
_BASE = ("ts", "level", "logger", "msg", "trace_id", "span_id")


def event_ref(namespace: str, event_key: str) -> str:
    """Names an event in logs without revealing its key: 12 hex digits of sha256(namespace NUL key).

    An operator holding the key computes the same reference to find its lines.
    """
    digest = hashlib.sha256(namespace.encode("utf-8") + b"\0" + event_key.encode("utf-8"))
    return digest.hexdigest()[:12]


def log_fields(logger: logging.Logger, level: int, msg: str, **fields: object) -> None:
    """Logs `msg` with structured fields (skipped cheaply when the level is off)."""
    if logger.isEnabledFor(level):
        logger.log(level, msg, extra={"fields": fields})


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    line: dict[str, Any] = {
        "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "level": record.levelname.lower(),
        "logger": record.name,
        "msg": record.getMessage(),
    }
    if tracing.TRACER is not None:
        _add_span(line)
    extra = getattr(record, "fields", None)
    if isinstance(extra, Mapping):
        for key, value in extra.items():
            line[key if key not in _BASE else f"field_{key}"] = value
    if record.exc_info:
        line["exc"] = logging.Formatter().formatException(record.exc_info)
    return line


def _add_span(line: dict[str, Any]) -> None:
    span = trace.get_current_span()
    if span.is_recording():
        context = span.get_span_context()
        line["trace_id"] = trace.format_trace_id(context.trace_id)
        line["span_id"] = trace.format_span_id(context.span_id)


def _escape_unprintable(text: str) -> str:
    """`text` (JSON, or logfmt's JSON-quoted values) with every unprintable character as a \\uXXXX escape."""
    return escape_unprintable(text)


class JsonFormatter(logging.Formatter):
    """One JSON object per line."""

    def format(self, record: logging.LogRecord) -> str:
        # json.dumps escapes C0 controls but leaves DEL, C1 and the rest raw; inside a JSON string
        # (the only place they can be) a \u escape keeps the line valid JSON.
        return _escape_unprintable(json.dumps(_fields(record), default=str, ensure_ascii=False))


class LogfmtFormatter(logging.Formatter):
    """key=value pairs, quoted where needed: readable in a terminal, still greppable."""

    def format(self, record: logging.LogRecord) -> str:
        return " ".join(f"{key}={_logfmt_value(value)}" for key, value in _fields(record).items())


def _logfmt_value(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if text and not any(c in text for c in ' ="\\') and UNPRINTABLE.search(text) is None:
        return text
    return _escape_unprintable(json.dumps(text, ensure_ascii=False))


def configure_logging(stream: TextIO = sys.stderr, level: str | None = None) -> None:
    """Sends every log record to `stream`: logfmt on a terminal, JSON lines otherwise.

    The level comes from `level`, else INBOXD_LOG_LEVEL, else INFO.
    """
    handler = logging.StreamHandler(stream)
    handler.setFormatter(LogfmtFormatter() if stream.isatty() else JsonFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel((level or os.environ.get("INBOXD_LOG_LEVEL") or "INFO").upper())
