"""The edge's operator tables: `[limits]` (connection bounds), `[metrics]` (Prometheus) and `[log]` (line format).

They sit beside `[edge]`, `[inboxd]` and `[[routes]]` in the routes file.
Unknown keys are errors, as everywhere in the file. A SIGHUP reload replaces
the routes only: these are read once, at start (a changed listen address or
log format needs a restart, which the reload says in its log line).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

LOG_FORMATS = ("text", "json")


class OpsSettingsError(ValueError):
    """A value of `[limits]`, `[metrics]` or `[log]` cannot be used; the message names the key."""


@dataclass(frozen=True)
class LimitsSettings:
    """How long a connection may take to send what it owes, and how many may be open at once."""

    # From a connection's opening (or its previous answer) until a request's headers are all in. A slowloris
    # sender that trickles them is closed when this passes, however it trickles.
    header_timeout_seconds: float = 10.0
    # From a request's headers until its whole body is in: past it, 408 and the connection closed.
    body_timeout_seconds: float = 30.0
    # Open connections at most, lowered to what the descriptor limit leaves. At the cap, a new connection
    # closes the oldest one still waiting for its headers, else it is closed itself.
    max_connections: int = 1000


@dataclass(frozen=True)
class MetricsSettings:
    """Prometheus metrics on `listen` (host:port); None: not served."""

    listen: str | None = None


@dataclass(frozen=True)
class LogSettings:
    """`format`: "text" (one key="value" line per request, today's) or "json" (one JSON object a line)."""

    format: str = "text"


@dataclass(frozen=True)
class OpsSettings:
    """The three operator tables together."""

    limits: LimitsSettings = field(default_factory=LimitsSettings)
    metrics: MetricsSettings = field(default_factory=MetricsSettings)
    log: LogSettings = field(default_factory=LogSettings)


def ops_settings(data: Mapping[str, Any]) -> OpsSettings:
    """The settings from the parsed file's `[limits]`, `[metrics]` and `[log]` tables."""
    limits = _table(data, "limits", LimitsSettings)
    for name in ("header_timeout_seconds", "body_timeout_seconds"):
        value = limits.get(name, getattr(LimitsSettings, name))
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 3600:
            raise OpsSettingsError(f"[limits]: {name} must be a number of seconds above 0 and at most 3600")
    cap = limits.get("max_connections", LimitsSettings.max_connections)
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
        raise OpsSettingsError(f"[limits]: max_connections must be a whole number of at least 1, not {cap!r}")
    metrics = _table(data, "metrics", MetricsSettings)
    listen = metrics.get("listen")
    if listen is not None and (not isinstance(listen, str) or ":" not in listen):
        raise OpsSettingsError(f"[metrics]: listen must be host:port, not {listen!r}")
    log = _table(data, "log", LogSettings)
    if log.get("format", "text") not in LOG_FORMATS:
        raise OpsSettingsError(f"[log]: format must be one of {list(LOG_FORMATS)}, not {log.get('format')!r}")
    return OpsSettings(
        limits=LimitsSettings(
            header_timeout_seconds=float(limits.get("header_timeout_seconds", LimitsSettings.header_timeout_seconds)),
            body_timeout_seconds=float(limits.get("body_timeout_seconds", LimitsSettings.body_timeout_seconds)),
            max_connections=cap,
        ),
        metrics=MetricsSettings(**metrics),
        log=LogSettings(**log),
    )


def _table(data: Mapping[str, Any], name: str, kind: type) -> dict[str, Any]:
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise OpsSettingsError(f"[{name}] must be a table")
    known = {f.name for f in fields(kind)}
    if unknown := set(value) - known:
        raise OpsSettingsError(f"[{name}]: unknown keys {sorted(unknown)} (it takes {sorted(known)})")
    return value
