"""Checks on what callers send, before anything touches the database.

Every check raises `InvalidArgument` naming the field, so no caller mistake
can surface later as a database error (and so as INTERNAL), and so one bad
event never fails the transaction it would have shared with good ones.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from inboxd.domain.errors import InvalidArgument

MAX_IDENTITY_BYTES = 512
MAX_METADATA_BYTES = 64 * 1024
MAX_TEXT_BYTES = 4 * 1024
MAX_JSON_DEPTH = 256

# PostgreSQL's numeric (which jsonb uses for every number) holds up to 131072
# digits before the decimal point and 16383 after it.
_NUMERIC_MAX_INTEGER_DIGITS = 131072
_NUMERIC_MAX_FRACTION_DIGITS = 16383
# numeric's parser refuses a literal exponent from INT_MAX/2 on, even on a zero.
_NUMERIC_MAX_EXPONENT = (2**31 - 1) // 2


def check_identity(field: str, value: str) -> str:
    """A required name: non-empty, at most 512 bytes of UTF-8, no NUL."""
    if not value:
        raise InvalidArgument(field, "is required")
    return check_text(field, value, MAX_IDENTITY_BYTES)


def required_reason(value: str, field: str = "reason") -> str:
    """An operator's reason for an act (Replay, a settlement, a discard): required, for the audit trail."""
    reason = check_text(field, value, MAX_TEXT_BYTES)
    if not reason.strip():
        raise InvalidArgument(field, "is required: say why, for the audit trail")
    return reason


def check_text(field: str, value: str, max_bytes: int) -> str:
    """Optional text PostgreSQL can store: no NUL, no lone surrogate, bounded."""
    if value.isascii():  # O(1) in CPython, and nearly every name: no copy to count its bytes
        size = len(value)
    else:
        try:
            size = len(value.encode("utf-8"))
        except UnicodeEncodeError:
            raise InvalidArgument(field, "is not valid UTF-8") from None
    if size > max_bytes:
        raise InvalidArgument(field, f"is {size} bytes; the limit is {max_bytes}")
    if "\x00" in value:
        raise InvalidArgument(field, "contains a NUL byte")
    return value


def check_revision(field: str, value: int) -> int:
    """An entity's business version: positive, or 0 for none (DESIGN: ordering keys)."""
    if value < 0:
        raise InvalidArgument(field, f"is {value}; a revision is positive, or 0 for none")
    return value


def check_metadata(field: str, metadata: Mapping[str, str]) -> dict[str, str]:
    if not metadata:
        return {}  # the common case, without walking a protobuf map's views
    total = 0
    for key, value in metadata.items():
        check_text(f"{field} key", key, MAX_METADATA_BYTES)
        check_text(f"{field}[{key!r}]", value, MAX_METADATA_BYTES)
        total += len(key.encode("utf-8")) + len(value.encode("utf-8"))
    if total > MAX_METADATA_BYTES:
        raise InvalidArgument(field, f"is {total} bytes; the limit is {MAX_METADATA_BYTES}")
    return dict(metadata)


MAX_CONTENT_TYPE_BYTES = 255
DEFAULT_CONTENT_TYPE = "application/json"

# A media type's characters (RFC 9110's token, and the slash); anything else
# is not a JSON type. SQL's inboxd_is_json_type (migration 0019) says the same.
_MEDIA_TYPE = re.compile(r"[A-Za-z0-9!#$&^_.+/-]+")


# RFC 9110's media-type: type "/" subtype *( OWS ";" OWS [ parameter ] ), a parameter's value a token or a
# quoted-string. A worker may re-emit the type as a header, so CR, LF and every other control are refused.
_TCHARS = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_QUOTED = r'"(?:[\t !#-\[\]-~\x80-\xff]|\\[\t -~\x80-\xff])*"'
_RFC9110_MEDIA_TYPE = re.compile(rf"{_TCHARS}/{_TCHARS}(?:[ \t]*;[ \t]*(?:{_TCHARS}=(?:{_TCHARS}|{_QUOTED}))?)*")


def check_content_type(field: str, value: str) -> str:
    """A payload's content type as stored: empty means application/json; an RFC 9110 media type of at most 255 bytes."""
    if not value:
        return DEFAULT_CONTENT_TYPE
    check_text(field, value, MAX_CONTENT_TYPE_BYTES)
    if _RFC9110_MEDIA_TYPE.fullmatch(value) is None:
        raise InvalidArgument(field, 'is not a media type (RFC 9110: type/subtype, then ; name=value or name="value")')
    return value


def is_json_type(content_type: str) -> bool:
    """Whether a payload of this type is JSON: application/json or any type/subtype+json.

    Compared on the media type without its parameters, ASCII case aside
    (`Application/JSON; charset=utf-8` is JSON), as inboxd_is_json_type in SQL.
    """
    if content_type == DEFAULT_CONTENT_TYPE:
        return True  # nearly every payload
    media = content_type.split(";", 1)[0].strip(" \t")
    if not _MEDIA_TYPE.fullmatch(media):
        return False
    media = media.lower()
    return media == DEFAULT_CONTENT_TYPE or (media.endswith("+json") and "/" in media[:-5])


# What makes a JSON payload worth the exact (slow) check here: a \u escape of
# NUL or of a surrogate, or more brackets than the depth limit (screens of the
# text, which may fire on text inside strings too: that costs only the exact
# check, never a wrong answer). Numbers are judged while the C parser reads
# them: see _FAST.
_RISKY_ESCAPE = re.compile(r"\\u(?:0000|[dD][89abcdefABCDEF])")
# An integer numeric cannot hold, in case Python's int digit limit is lifted.
_LONG_DIGITS = re.compile(rf"\d{{{_NUMERIC_MAX_INTEGER_DIGITS + 1}}}")


def check_payload(field: str, payload: bytes, max_bytes: int, *, is_json: bool = True) -> None:
    """Refuses a payload over the size limit, and under a JSON type one that jsonb could not hold.

    Any other content type takes any bytes. A JSON payload is parsed once,
    here, by the C parser: PostgreSQL stores the bytes as they came and parses
    them only to compare a repeat whose bytes differ. What the C parser takes
    but jsonb would not (NaN, NUL and surrogate escapes, numbers beyond
    numeric, depth) the constant hook and the screens send to the exact check.
    """
    if len(payload) > max_bytes:
        raise InvalidArgument(field, f"is {len(payload)} bytes; the limit is {max_bytes}")
    if not is_json:
        return
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgument(field, f"is not UTF-8 (byte {exc.start})") from None
    if _needs_exact_check(text):
        _check_payload_exactly(field, text)
        return
    try:
        _parse(text)
    except _NotStorable as exc:
        raise InvalidArgument(field, str(exc)) from None
    except json.JSONDecodeError as exc:
        raise InvalidArgument(field, f"is not JSON: {exc.msg} at position {exc.pos}") from None
    except (ValueError, RecursionError):  # an int past Python's 4300 digits, say: the exact check words it
        _check_payload_exactly(field, text)


def _needs_exact_check(text: str) -> bool:
    return (
        ("\\u" in text and _RISKY_ESCAPE.search(text) is not None)
        or (len(text) > MAX_JSON_DEPTH and text.count("[") + text.count("{") > MAX_JSON_DEPTH)
        or (len(text) > _NUMERIC_MAX_INTEGER_DIGITS and _LONG_DIGITS.search(text) is not None)
    )


def _check_payload_exactly(field: str, text: str) -> str:
    """Parses every value (each number as a Decimal, every repeated key) to find what jsonb refuses."""
    try:
        value = json.loads(
            text,
            # Keep every pair: a repeated key's first value is still parsed by jsonb.
            object_pairs_hook=_Pairs,
            parse_constant=_reject_constant,
            parse_float=_check_number,
            parse_int=_check_number,
        )
    except _NotStorable as exc:
        raise InvalidArgument(field, str(exc)) from None
    except json.JSONDecodeError as exc:
        raise InvalidArgument(field, f"is not JSON: {exc.msg} at position {exc.pos}") from None
    except RecursionError:
        raise InvalidArgument(field, f"nests deeper than {MAX_JSON_DEPTH} levels") from None
    problem = _unstorable_part(value)
    if problem:
        raise InvalidArgument(field, problem)
    return text


class _NotStorable(ValueError):
    pass


class _Pairs(list[tuple[str, Any]]):
    """A JSON object as all its (key, value) pairs, repeated keys included."""


def _reject_constant(name: str) -> Any:
    # Python's json accepts NaN and Infinity; JSON and jsonb do not.
    raise _NotStorable(f"is not JSON: {name} is not a JSON number")


def _check_float(text: str) -> float:
    """A number with a fraction or an exponent, as the C parser meets it: judged exactly only when it could matter.

    Under 4000 characters with an exponent of at most 4 digits, a number has
    at most 13999 digits before or after the point: within numeric's range.
    (An integer has no hook: past 4300 digits Python's int refuses it, and the
    exact check judges it; below, numeric holds it.)
    """
    _, marker, exponent = text.replace("E", "e").partition("e")
    if len(text) >= 4000 or (marker and len(exponent.lstrip("+-")) > 4):
        _check_number(text)
    return 0.0  # never used: the payload is stored as it came


def _parse(text: str) -> None:
    """Parses `text` as one JSON value; raw_decode first, without decode's two whitespace regexes.

    Nearly every payload has no whitespace around its value; those were a
    fifth of the parse of a 310-byte payload.
    """
    try:
        _, end = _FAST.raw_decode(text)
    except json.JSONDecodeError:
        end = -1
    if end != len(text):  # whitespace around the value, or an error: decode judges and words it
        _FAST.decode(text)


# The C parser, refusing NaN and Infinity and judging numbers with a fraction
# or an exponent through hooks that keep it in C for everything else.
_FAST = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_check_float)


def _check_number(text: str) -> int:
    try:
        number = Decimal(text)
    except InvalidOperation:  # an exponent beyond what Decimal (and so numeric) can hold
        raise _NotStorable(f"has a number PostgreSQL cannot store: {text[:40]}") from None
    _, digits, exponent = number.as_tuple()
    assert isinstance(exponent, int)
    # numeric keeps the literal's scale (0.10 has two fraction digits), and a
    # zero has no integer digits however large its exponent.
    integer_digits = 0 if number.is_zero() else len(digits) + exponent
    fraction_digits = max(0, -exponent)
    if (
        integer_digits > _NUMERIC_MAX_INTEGER_DIGITS
        or fraction_digits > _NUMERIC_MAX_FRACTION_DIGITS
        or _literal_exponent_too_large(text)
    ):
        raise _NotStorable(f"has a number beyond PostgreSQL's numeric range: {text[:40]}")
    return 0  # the value itself is never used: PostgreSQL parses the original text


def _literal_exponent_too_large(text: str) -> bool:
    _, marker, exponent = text.lower().partition("e")
    if not marker:
        return False
    digits = exponent.lstrip("+-").lstrip("0")
    return len(digits) > 10 or (bool(digits) and int(digits) >= _NUMERIC_MAX_EXPONENT)


def _unstorable_part(value: Any) -> str | None:
    """Walks the parsed JSON iteratively, looking for what jsonb refuses."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return f"nests deeper than {MAX_JSON_DEPTH} levels"
        if isinstance(item, str):
            problem = _string_problem(item)
            if problem:
                return problem
        elif isinstance(item, _Pairs):
            for key, child in item:
                problem = _string_problem(key)
                if problem:
                    return problem
                stack.append((child, depth + 1))
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
    return None


def _string_problem(text: str) -> str | None:
    if "\x00" in text:
        return "holds \\u0000, which PostgreSQL's jsonb cannot store"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "holds a lone surrogate escape (\\ud800-\\udfff), which is not valid Unicode"
    return None
