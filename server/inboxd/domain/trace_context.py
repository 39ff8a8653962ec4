"""W3C Trace Context as an event carries it: the delivery's `traceparent` and `tracestate`, kept verbatim.

inboxd stores the context an event's first Accept brought and hands it back
on every claim, so the worker's span joins the trace the delivery started
(DESIGN, Tracing). Storing it needs no tracing SDK: it is two strings, checked
here so that a malformed one is refused by name (the AcceptRequest field) or
ignored (call metadata, as W3C asks of a receiver), never stored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from inboxd.domain.errors import InvalidArgument
from inboxd.domain.validation import check_text

# Each header's bound: W3C's tracestate holds at most 32 entries and a receiver may cut it at 512 bytes.
MAX_HEADER_BYTES = 512

# version-trace_id-parent_id-flags, lowercase hex. A version above 00 may append fields after a dash
# (the specification's rule for versions it does not know); ff is invalid.
# The fields after them are capped at 128 visible characters: a worker may re-emit the header as it came.
_TRACEPARENT = re.compile(r"(?!ff)[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}(-[!-~]{0,128})?")

# W3C tracestate: up to 32 comma-separated members (empty ones allowed), each key=value; a key is
# lcalpha then [a-z0-9_*/-], or tenant@system; a value is up to 256 visible characters but ',' and '=',
# its last not a space. Nothing else, so no CR, LF or control reaches a worker that re-emits it.
_TRACESTATE_KEY = r"(?:[a-z][a-z0-9_*/-]{0,255}|[a-z0-9][a-z0-9_*/-]{0,240}@[a-z][a-z0-9_*/-]{0,13})"
_TRACESTATE_VALUE = r"[ !-+\--<>-~]{0,255}[!-+\--<>-~]"
_TRACESTATE_MEMBER = re.compile(rf"{_TRACESTATE_KEY}={_TRACESTATE_VALUE}")
MAX_TRACESTATE_MEMBERS = 32


@dataclass(frozen=True, slots=True)
class TraceContext:
    """A delivery's trace context, as its two headers carry it."""

    traceparent: str
    # Vendors' entries, as received; "" when there are none.
    tracestate: str = ""

    @property
    def trace_id(self) -> str:
        return self.traceparent[3:35]


def is_traceparent(value: str) -> bool:
    """Whether `value` is a traceparent W3C's rules accept (version 00 has exactly four fields)."""
    if _TRACEPARENT.fullmatch(value) is None:
        return False
    return not (value.startswith("00-") and len(value) != 55)


def is_tracestate(value: str) -> bool:
    """Whether `value` is a tracestate by W3C's grammar (an empty one is)."""
    members = [m.strip(" \t") for m in value.split(",")]
    if len([m for m in members if m]) > MAX_TRACESTATE_MEMBERS:
        return False
    return all(not m or _TRACESTATE_MEMBER.fullmatch(m) for m in members)


def check_trace_context(field: str, traceparent: str, tracestate: str) -> TraceContext | None:
    """The context of an AcceptRequest's trace_context field; raises InvalidArgument naming the bad header.

    An empty traceparent is no trace (and then a tracestate alone means nothing: dropped, as W3C's
    receivers drop it); so is a tracestate over MAX_HEADER_BYTES, the trace kept.
    """
    if not traceparent:
        return None
    check_text(f"{field}.traceparent", traceparent, MAX_HEADER_BYTES)
    if not is_traceparent(traceparent):
        raise InvalidArgument(
            f"{field}.traceparent",
            "is not a W3C traceparent (00-<32 hex trace id>-<16 hex span id>-<2 hex flags>, lowercase, ids not zero)",
        )
    if len(tracestate.encode("utf-8", "replace")) > MAX_HEADER_BYTES:
        # W3C lets a receiver drop a tracestate it will not carry whole; OpenTelemetry's may reach 8 KiB, and
        # refusing the delivery over a header the trace does not need would lose more than it keeps.
        return TraceContext(traceparent, "")
    check_text(f"{field}.tracestate", tracestate, MAX_HEADER_BYTES)
    if not is_tracestate(tracestate):
        raise InvalidArgument(
            f"{field}.tracestate",
            "is not a W3C tracestate (at most 32 comma-separated key=value members; printable ASCII, no control)",
        )
    return TraceContext(traceparent, tracestate)


def trace_context_from_headers(headers: Iterable[tuple[str, str | bytes]] | None) -> TraceContext | None:
    """The context in a call's metadata (`traceparent`, `tracestate`), or None when absent or malformed.

    A malformed context in metadata is ignored, not refused: W3C asks a receiver to start afresh rather
    than fail the request, and the metadata may come from a proxy the caller does not control.
    """
    traceparent = tracestate = ""
    for key, value in headers or ():
        if key == "traceparent":
            traceparent = value.decode("ascii", "replace") if isinstance(value, bytes) else value
        elif key == "tracestate":
            tracestate = value.decode("ascii", "replace") if isinstance(value, bytes) else value
    if not traceparent:
        return None
    traceparent = traceparent.strip()
    tracestate = tracestate.strip()
    if len(traceparent) > MAX_HEADER_BYTES or not is_traceparent(traceparent):
        return None
    if len(tracestate.encode("utf-8", "replace")) > MAX_HEADER_BYTES or not is_tracestate(tracestate):
        tracestate = ""  # W3C lets a receiver drop a tracestate it will not carry whole, or cannot parse
    return TraceContext(traceparent, tracestate)
