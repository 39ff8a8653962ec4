"""The W3C checks on a delivery's trace context (domain/trace_context.py)."""

from __future__ import annotations

import pytest

from inboxd.domain.errors import InvalidArgument
from inboxd.domain.trace_context import (
    TraceContext,
    check_trace_context,
    is_traceparent,
    is_tracestate,
    trace_context_from_headers,
)

VALID = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        (VALID, True),
        ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", True),
        ("cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-later", True),
        ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-later", False),
        ("ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", False),
        ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333-01", False),
        ("00-0af7651916cd43dd8448eb211c80319g-b7ad6b7169203331-01", False),
        ("", False),
    ],
)
def test_traceparents_are_judged_by_the_w3c_rules(value: str, valid: bool) -> None:
    assert is_traceparent(value) is valid


def test_the_field_check_names_the_header_it_refuses() -> None:
    assert check_trace_context("trace_context", "", "a=1") is None
    assert check_trace_context("trace_context", VALID, "a=1") == TraceContext(VALID, "a=1")
    with pytest.raises(InvalidArgument, match="traceparent"):
        check_trace_context("trace_context", "nope", "")
    with pytest.raises(InvalidArgument, match="tracestate"):
        check_trace_context("trace_context", VALID, "a\x00b")
    # A tracestate over the bound is dropped, not refused: the delivery matters more than a vendor's header.
    assert check_trace_context("trace_context", VALID, "a=" + "x" * 600) == TraceContext(VALID, "")


def test_metadata_is_read_as_str_or_bytes_and_what_is_malformed_ignored() -> None:
    assert trace_context_from_headers([("traceparent", VALID.encode()), ("tracestate", b"a=1")]) == TraceContext(
        VALID, "a=1"
    )
    assert trace_context_from_headers([("traceparent", f" {VALID} ")]) == TraceContext(VALID, "")
    assert trace_context_from_headers([("traceparent", "junk")]) is None
    assert trace_context_from_headers([("tracestate", "a=1")]) is None
    assert trace_context_from_headers(None) is None
    # A tracestate inboxd would not carry whole is dropped, the trace kept.
    assert trace_context_from_headers([("traceparent", VALID), ("tracestate", "a=" + "x" * 600)]) == TraceContext(
        VALID, ""
    )
    assert TraceContext(VALID).trace_id == "0af7651916cd43dd8448eb211c80319c"


def test_a_later_versions_extra_fields_are_capped_at_128_visible_characters() -> None:
    head = "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    assert is_traceparent(f"{head}-{'a' * 128}")
    assert not is_traceparent(f"{head}-{'a' * 129}")
    assert not is_traceparent(f"{head}-a b")


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("", True),
        ("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", True),
        ("a=1 , b=2,,", True),
        ("tenant@system=v", True),
        ("a=1\r\nx: y", False),
        ("A=1", False),
        ("a=", False),
        ("a==b", False),
        (",".join(f"k{i}=v" for i in range(33)), False),
    ],
)
def test_tracestates_are_judged_by_the_w3c_grammar(value: str, valid: bool) -> None:
    assert is_tracestate(value) is valid
