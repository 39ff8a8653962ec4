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
_TRACEPARENT = re.compile(r"(?!ff)[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}(-[ -~]*)?")


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
    if len(traceparent) > MAX_HEADER_BYTES or not is_traceparent(traceparent) or "\x00" in tracestate:
        return None
    if len(tracestate.encode("utf-8", "replace")) > MAX_HEADER_BYTES:
        tracestate = ""  # W3C lets a receiver drop a tracestate it will not carry whole
    return TraceContext(traceparent, tracestate)
