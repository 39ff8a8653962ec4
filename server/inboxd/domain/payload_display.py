"""How a payload is shown to a person, by its content type: JSON pretty-printed, form fields, text, or hex.

The console's event page and `inboxd show` both call `display_payload` and
only lay out what it answers (HTML there, a terminal here), so the two never
disagree about what a payload is. Each shape has one function here. Bytes
that do not decode under their declared type are shown as hex, with a note
saying why: an operator must never read a guess as the payload.

Pure functions over bytes and a content type; no escaping here (each layout
escapes for its medium).
"""

from __future__ import annotations

import codecs
import json
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import parse_qsl

from inboxd.domain.validation import DEFAULT_CONTENT_TYPE, is_json_type

# A hex dump shows at most this many bytes (256 lines of 16): enough to recognise a
# binary body, not megabytes of digits. The rest is counted in the note.
HEX_SHOWN_BYTES = 4096
HEX_ROW = 16
# A form shows at most this many fields; the rest are counted in the note.
FORM_SHOWN_FIELDS = 1000


class Shape(StrEnum):
    """How a payload is laid out."""

    JSON = "json"
    FORM = "form"
    TEXT = "text"
    HEX = "hex"


@dataclass(frozen=True, slots=True)
class PayloadDisplay:
    """A payload ready to lay out: its shape, its text (JSON, text, hex) or fields (form), and a note."""

    content_type: str
    shape: Shape
    size: int
    text: str = ""
    # A form's fields in the order they came, repeated names kept.
    fields: tuple[tuple[str, str], ...] = ()
    # Why it is shown as hex, or how much is not shown; "" when nothing needs saying.
    note: str = ""


def media_type(content_type: str) -> str:
    """The media type without parameters, lower case (`application/json` for an empty content type)."""
    return content_type.split(";", 1)[0].strip().lower() or DEFAULT_CONTENT_TYPE


def charset(content_type: str) -> str:
    """The `charset` parameter of a content type, lower case; utf-8 when it names none."""
    for parameter in content_type.split(";")[1:]:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset" and value.strip().strip('"'):
            return value.strip().strip('"').lower()
    return "utf-8"


def is_json_content_type(content_type: str) -> bool:
    """Whether a payload of this type is JSON (validation.is_json_type); empty, as an older server answers, is JSON."""
    return is_json_type(content_type or DEFAULT_CONTENT_TYPE)


def is_form_type(content_type: str) -> bool:
    return media_type(content_type) == "application/x-www-form-urlencoded"


def is_text_type(content_type: str) -> bool:
    """Text, and XML (which is text with markup): `text/*`, `application/xml`, `*+xml`."""
    kind = media_type(content_type)
    return kind.startswith("text/") or kind == "application/xml" or kind.endswith("+xml")


def display_payload(payload: bytes, content_type: str) -> PayloadDisplay:
    """The payload in the shape its content type names, or as hex when its bytes do not decode under it."""
    shown_type = content_type or DEFAULT_CONTENT_TYPE
    size = len(payload)
    if is_json_type(shown_type):
        pretty = pretty_json(payload)
        if pretty is not None:
            return PayloadDisplay(shown_type, Shape.JSON, size, text=pretty)
        return _hex(payload, shown_type, "not valid JSON")
    if is_form_type(shown_type):
        fields = form_fields(payload, charset(shown_type))
        if fields is not None:
            more = len(fields) - FORM_SHOWN_FIELDS
            note = f"{more:,} more fields not shown (the first {FORM_SHOWN_FIELDS:,} are)" if more > 0 else ""
            return PayloadDisplay(shown_type, Shape.FORM, size, fields=tuple(fields[:FORM_SHOWN_FIELDS]), note=note)
        return _hex(payload, shown_type, f"not a form in {charset(shown_type)}")
    if is_text_type(shown_type):
        text = decoded_text(payload, charset(shown_type))
        if text is not None:
            return PayloadDisplay(shown_type, Shape.TEXT, size, text=text)
        return _hex(payload, shown_type, f"does not decode as {charset(shown_type)}")
    return _hex(payload, shown_type, "")


def _hex(payload: bytes, content_type: str, why: str) -> PayloadDisplay:
    dump, hidden = hex_dump(payload)
    notes = [f"{why}: shown as hex"] if why else []
    if hidden:
        notes.append(f"{hidden:,} of {len(payload):,} bytes not shown (the first {len(payload) - hidden:,} are)")
    return PayloadDisplay(content_type, Shape.HEX, len(payload), text=dump, note="; ".join(notes))


def hex_dump(payload: bytes, limit: int = HEX_SHOWN_BYTES) -> tuple[str, int]:
    """Offset, 16 bytes in hex, and their printable ASCII, a line each (as `hexdump -C`); and the bytes left out."""
    lines = []
    for offset in range(0, min(len(payload), limit), HEX_ROW):
        row = payload[offset : min(offset + HEX_ROW, limit)]
        digits = " ".join(f"{b:02x}" for b in row)
        # Two groups of eight, as hexdump -C prints them.
        if len(row) > 8:
            digits = digits[:23] + " " + digits[23:]
        printable = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in row)
        lines.append(f"{offset:08x}  {digits.ljust(HEX_ROW * 3)}  |{printable}|")
    return "\n".join(lines), max(len(payload) - limit, 0)


def decoded_text(payload: bytes, encoding: str) -> str | None:
    """The payload as text in `encoding`; None when it does not decode (or the encoding is unknown)."""
    try:
        codecs.lookup(encoding)
        return _showable(payload.decode(encoding))
    except (LookupError, UnicodeDecodeError):
        return None


def _showable(text: str) -> str | None:
    """The text, unless it holds what no page or terminal can encode.

    A charset the sender names may be one of Python's own codecs
    (`unicode_escape`), which can decode to lone surrogates.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return text


def form_fields(payload: bytes, encoding: str) -> list[tuple[str, str]] | None:
    """An `application/x-www-form-urlencoded` body's fields, in order, repeated names kept; None if it is not one."""
    text = decoded_text(payload, encoding)
    if text is None:
        return None
    try:
        # keep_blank_values: `a=&b` is two fields with empty values, as a browser sends them.
        fields = parse_qsl(text, keep_blank_values=True, encoding=encoding, errors="strict")
    except (UnicodeDecodeError, ValueError):
        return None
    return fields if all(_showable(name + value) is not None for name, value in fields) else None


class _Number(str):
    """A JSON number as written: 1.0, 1e400 and 12345678901234567890 are shown as the sender wrote them."""


class _Object(list[tuple[str, object]]):
    """A JSON object as its members in order, repeated names kept (a dict would keep only the last)."""


def _refuse(constant: str) -> object:
    raise ValueError(f"{constant} is not JSON")


def pretty_json(payload: bytes) -> str | None:
    """The payload as JSON indented by two spaces; None when it is not JSON.

    Members keep their order and repeats, numbers their spelling: what the
    sender wrote, laid out, so an auditor reading it is not misled.
    """
    try:
        value = json.loads(
            payload, object_pairs_hook=_Object, parse_float=_Number, parse_int=_Number, parse_constant=_refuse
        )
        return _render(value, 0)
    except (ValueError, RecursionError):
        return None


def _render(value: object, depth: int) -> str:
    inner, outer = "  " * (depth + 1), "  " * depth
    if isinstance(value, _Object):
        members = [f"{inner}{_string(name)}: {_render(item, depth + 1)}" for name, item in value]
        return "{\n" + ",\n".join(members) + f"\n{outer}}}" if members else "{}"
    if isinstance(value, list):
        items = [inner + _render(item, depth + 1) for item in value]
        return "[\n" + ",\n".join(items) + f"\n{outer}]" if items else "[]"
    if isinstance(value, _Number):
        return str.__str__(value)
    if isinstance(value, str):
        return _string(value)
    return json.dumps(value)  # true, false, null


def _string(value: str) -> str:
    shown = json.dumps(value, ensure_ascii=False)
    try:
        shown.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate escape (\ud800) stays an escape: it has no UTF-8 to show.
        return json.dumps(value)
    return shown
