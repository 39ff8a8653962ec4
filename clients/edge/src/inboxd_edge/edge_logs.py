"""The edge's log lines: `[log] format = "text"` (today's) or `"json"`, one JSON object a line, as the server's.

A JSON line has `ts`, `level`, `logger` and `msg`; a request's line adds its
fields as members (`route`, `status`, `outcome`, `reason`, `type`,
`delivery`, and `trace_id`/`span_id` when traced), which app.py passes in
`extra={"fields": ...}`. An exception's traceback goes in `exc`. Characters a
terminal would act on (controls, bidi marks, separators) come out as \\u
escapes, so a value from a request can neither break a line nor hide in one.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, TextIO

_BASE = ("ts", "level", "logger", "msg")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"

# The server's set (inboxd.observability.logs): C0 and C1 controls, DEL, bidi and zero-width marks, line and
# paragraph separators, lone surrogates.
_UNPRINTABLE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\ud800-\udfff]"
)


class JsonFormatter(logging.Formatter):
    """One JSON object per line."""

    def format(self, record: logging.LogRecord) -> str:
        extra = getattr(record, "fields", None)
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            # A request's line is its fields; the logfmt text of them would only repeat them.
            "msg": "request" if isinstance(extra, Mapping) else record.getMessage(),
        }
        if isinstance(extra, Mapping):
            for key, value in extra.items():
                line[key if key not in _BASE else f"field_{key}"] = value
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        # json.dumps escapes C0 controls but leaves DEL, C1 and the rest raw; inside a JSON string (the only place
        # they can be) a \u escape keeps the line valid JSON.
        text = json.dumps(line, default=str, ensure_ascii=False)
        return _UNPRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def configure_logging(log_format: str = "text", stream: TextIO = sys.stderr) -> None:
    """Every record to `stream`, as `log_format` says ("text" or "json"), at INFO."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.INFO)
