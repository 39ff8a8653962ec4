"""Input checks, with no database: each refusal names the field and says why."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inboxd.domain.errors import InvalidArgument
from inboxd.domain.validation import (
    MAX_JSON_DEPTH,
    _check_payload_exactly,
    check_content_type,
    check_identity,
    check_metadata,
    check_payload,
    check_text,
    is_json_type,
)

LIMIT = 1024 * 1024


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("", "is required"),
        ("x" * 513, "is 513 bytes; the limit is 512"),
        ("é" * 257, "is 514 bytes; the limit is 512"),
        ("a\x00b", "contains a NUL byte"),
        ("\ud800", "is not valid UTF-8"),
    ],
)
def test_identity_refusals_name_the_field(value: str, problem: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        check_identity("event_key", value)
    assert caught.value.field == "event_key"
    assert caught.value.problem == problem


def test_identity_at_the_limit_is_accepted() -> None:
    assert check_identity("namespace", "n" * 512) == "n" * 512


def test_optional_text_may_be_empty() -> None:
    assert check_text("message_id", "", 512) == ""


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        (b"", "is not JSON"),
        (b"{", "is not JSON"),
        (b"{} {}", "is not JSON: Extra data at position 3"),
        (b"  ", "is not JSON: Expecting value at position 2"),
        (b"\xff\xfe{}", "is not UTF-8"),
        (b'{"a": NaN}', "NaN is not a JSON number"),
        (b"Infinity", "Infinity is not a JSON number"),
        (b'{"a": "\\u0000"}', "\\u0000"),
        (b'{"\\u0000": 1}', "\\u0000"),
        (b'["\\ud800"]', "lone surrogate"),
        (b'"\\udc00\\ud800"', "lone surrogate"),
        (b"1e131072", "beyond PostgreSQL's numeric range"),
        (b"9" * 131073, "beyond PostgreSQL's numeric range"),
        (b"1e-16384", "beyond PostgreSQL's numeric range"),
        (b"0e-20000", "beyond PostgreSQL's numeric range"),
        (b"1e999999999999999999999", "cannot store"),
        (b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1), "nests deeper"),
        (b"[" * 100_000 + b"]" * 100_000, "nests deeper"),
    ],
)
def test_json_payloads_jsonb_cannot_hold_are_refused(payload: bytes, fragment: str) -> None:
    """Refused by the server itself: PostgreSQL no longer parses a payload to store it."""
    with pytest.raises(InvalidArgument) as caught:
        check_payload("payload", payload, LIMIT)
    assert caught.value.field == "payload"
    assert fragment in caught.value.problem


@pytest.mark.parametrize(
    "payload", [b"", b"{", b"\xff\xfe{}", b'{"a": NaN}', b'{"a": "\\u0000"}', b"1e131072", b"\x00\x01binary"]
)
def test_payloads_of_other_types_take_any_bytes(payload: bytes) -> None:
    check_payload("payload", payload, LIMIT, is_json=False)


def test_payloads_of_other_types_keep_the_size_limit() -> None:
    with pytest.raises(InvalidArgument, match="is 11 bytes; the limit is 10"):
        check_payload("payload", b"<xml>1</xml", 10, is_json=False)


@pytest.mark.parametrize(
    "payload",
    [
        b"{}",
        b"[]",
        b"1",
        b'"text"',
        b"null",
        b"1e131071",
        b"0e99999999",
        b'"\\ud83d\\ude00"',
        '{"é": 1}'.encode(),
        b' \r\n{"a": 1}\t\n',
        b"1.5e-9999",
    ],
)
def test_payloads_jsonb_can_hold_are_taken(payload: bytes) -> None:
    check_payload("payload", payload, LIMIT)


def test_payload_over_the_limit_is_refused_with_both_sizes() -> None:
    with pytest.raises(InvalidArgument, match="is 11 bytes; the limit is 10"):
        check_payload("payload", b'"123456789"', 10)


def test_metadata_refuses_nul_and_excess() -> None:
    with pytest.raises(InvalidArgument, match="NUL"):
        check_metadata("metadata", {"k": "v\x00"})
    with pytest.raises(InvalidArgument, match="limit"):
        check_metadata("metadata", {"k": "v" * 70_000})
    assert check_metadata("metadata", {"delivery": "d1"}) == {"delivery": "d1"}


# -- the screens refuse nothing the exact check takes, and explain what it refuses --

_NUMBER = st.from_regex(r"\A-?(0|[1-9][0-9]{0,6})(\.[0-9]{1,6})?([eE][+-]?[0-9]{1,12})?\Z")
_ESCAPE = st.sampled_from(["\\u0000", "\\ud800", "\\udfff", "\\ud83d\\ude00", "\\u00e9", "\\\\u0000", "\\n", "e5"])
_STRING = st.lists(st.one_of(st.text(max_size=5), _ESCAPE), max_size=4).map(
    lambda parts: '"' + "".join(p if p.startswith("\\") or p == "e5" else json.dumps(p)[1:-1] for p in parts) + '"'
)
_JSON = st.recursive(
    st.one_of(_NUMBER, _STRING, st.sampled_from(["true", "false", "null", "NaN"])),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda items: "[" + ", ".join(items) + "]"),
        st.lists(st.tuples(_STRING, inner), max_size=4).map(
            lambda pairs: "{" + ",".join(f"{k}:{v}" for k, v in pairs) + "}"
        ),
    ),
    max_leaves=12,
)


def _verdict(check: Callable[[], Any]) -> str:
    try:
        check()
        return "ok"
    except InvalidArgument as exc:
        return exc.problem


@settings(max_examples=1000, derandomize=True, deadline=None)
@given(_JSON)
def test_the_fast_check_refuses_what_the_exact_check_refuses_and_in_its_words(text: str) -> None:
    screened = _verdict(lambda: check_payload("payload", text.encode(), LIMIT))
    exact = _verdict(lambda: _check_payload_exactly("payload", text))
    assert screened == exact, (text, screened, exact)


# -- content types --


@pytest.mark.parametrize(
    ("content_type", "is_json"),
    [
        ("application/json", True),
        ("Application/JSON", True),
        ("application/json; charset=utf-8", True),
        (" application/json ;charset=utf-8", True),
        ("application/vnd.api+json", True),
        ("application/cloudevents+JSON; charset=utf-8", True),
        ("application/x-www-form-urlencoded", False),
        ("text/plain", False),
        ("application/xml", False),
        ("application/octet-stream", False),
        ("+json", False),
        ("application/jsonx", False),
        ("application/json-seq", False),
        ("applİcation/json", False),
        ("application/js\u212aon", False),
    ],
)
def test_json_types_are_told_by_their_media_type(content_type: str, is_json: bool) -> None:
    assert is_json_type(content_type) is is_json


def test_an_empty_content_type_means_json() -> None:
    assert check_content_type("content_type", "") == "application/json"
    assert check_content_type("content_type", "text/plain; charset=utf-8") == "text/plain; charset=utf-8"


@pytest.mark.parametrize(
    ("value", "problem"),
    [("t/" + "x" * 254, "is 256 bytes; the limit is 255"), ("text/plain\x00", "contains a NUL byte")],
)
def test_content_type_refusals_name_the_field(value: str, problem: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        check_content_type("content_type", value)
    assert caught.value.field == "content_type"
    assert caught.value.problem == problem
