"""How a setting's text becomes its value (durations, sizes, flags, host names), and how a duration is shown.

Each parser names the setting in its error, so a refusal at start says which
variable or flag to fix and what it should look like.
"""

from __future__ import annotations

import ipaddress
import re
from datetime import timedelta

from inboxd.domain.vocabulary import StaleRevisions

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


class ConfigError(ValueError):
    """A setting has a value inboxd cannot use; the message names the setting."""


def parse_duration(name: str, text: str) -> timedelta:
    """'30s', '500ms', '15m', '2h', '7d'; a bare number is seconds."""
    match = _DURATION.match(text)
    if not match:
        raise ConfigError(f"{name}={text!r} is not a duration such as 500ms, 30s, 15m, 2h or 7d")
    return timedelta(seconds=float(match.group(1)) * _UNIT_SECONDS[match.group(2)])


def parse_flag(name: str, text: str) -> bool:
    """'1', 'true', 'yes', 'on' (or their opposites), any case."""
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"{name}={text!r} is neither 1/true/yes/on nor 0/false/no/off")


def parse_stale_revisions(name: str, text: str) -> StaleRevisions:
    """'ignore' (the default) or 'deliver'."""
    try:
        return StaleRevisions(text.strip().lower())
    except ValueError:
        choices = " or ".join(repr(c.value) for c in StaleRevisions)
        raise ConfigError(f"{name}={text!r} is neither {choices}") from None


def parse_host_names(text: str) -> tuple[str, ...]:
    """'console.example.com, ops.example.com:8443': host names, each with or without a port."""
    names = tuple(n.strip().lower() for n in text.split(",") if n.strip())
    for name in names:
        if "/" in name or "@" in name or " " in name:
            raise ValueError(f"{name!r} is not a host name (write it without a scheme or a path)")
    return names


def parse_allow_list(text: str) -> tuple[str, ...]:
    """'127.0.0.1/32, 10.1.0.0/16, hooks.internal': CIDRs, addresses or host names (INBOXD_DESTINATIONS_ALLOW)."""
    entries = tuple(e.strip().lower() for e in text.split(",") if e.strip())
    for entry in entries:
        if "/" in entry:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError as exc:
                raise ValueError(f"{entry!r} is not a CIDR: {exc}") from None
        elif "@" in entry or " " in entry or (":" in entry and not _is_address(entry)):
            raise ValueError(f"{entry!r} is not a CIDR, an address or a host name")
    return entries


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def parse_size(name: str, text: str) -> int:
    match = re.match(r"^\s*(\d+)\s*(B|KiB|MiB|GiB)?\s*$", text)
    if not match:
        raise ConfigError(f"{name}={text!r} is not a size such as 1048576, 512KiB or 1MiB")
    scale = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, None: 1}[match.group(2)]
    return int(match.group(1)) * scale


def shown_duration(value: timedelta) -> str:
    """A duration as the settings write it: 7d, 2h, 15m, 30s, 500ms."""
    ms = round(value.total_seconds() * 1000)
    if ms == 0:
        return "0"
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"
