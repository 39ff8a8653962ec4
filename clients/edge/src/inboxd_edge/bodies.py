"""A delivery's body as its content type says: JSON, a form, or bytes the edge forwards without reading.

The edge forwards the body it verified byte for byte, with the request's
``Content-Type`` as the event's ``content_type``. It reads a body only to
name the event from it (``body:`` sources): a JSON body as JSON, a form body
(``application/x-www-form-urlencoded``, as Twilio and Slack post) as its
fields. Any other type (XML, text, binary) is forwarded unread, so only
``const:``, signed headers, bound path placeholders or ``digest:sha256`` can
name its event. No ``Content-Type`` means JSON, as it does to inboxd.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl

FORM = "application/x-www-form-urlencoded"


def media_type(content_type: str) -> str:
    """The type without its parameters, lowercase: ``Application/JSON; charset=utf-8`` is ``application/json``."""
    return content_type.partition(";")[0].strip().lower()


def is_json(content_type: str) -> bool:
    """True for ``application/json``, any ``+json`` type, and no type at all (inboxd's default)."""
    kind = media_type(content_type)
    return kind in ("", "application/json") or kind.endswith("+json")


def is_form(content_type: str) -> bool:
    """True for a form-encoded body."""
    return media_type(content_type) == FORM


def form_fields(body: bytes) -> list[tuple[str, str]]:
    """Every field of a form body, in order, repeats kept; raises ValueError unless it is UTF-8 throughout."""
    text = body.decode("utf-8")
    return parse_qsl(text, keep_blank_values=True, encoding="utf-8", errors="strict")


def document(body: bytes, content_type: str) -> Any:
    """What ``body:`` sources read: the JSON value, the form's fields, or None; raises ValueError with the reason.

    A form field sent more than once maps to the list of its values, which no
    source reads as an identifier: one field, two values, is not a name.
    """
    if is_json(content_type):
        try:
            return _strict_json(body)
        except ValueError:
            raise ValueError("body is not UTF-8 JSON") from None
    if is_form(content_type):
        try:
            fields = form_fields(body)
        except ValueError:
            raise ValueError("body is not a UTF-8 form") from None
        grouped: dict[str, Any] = {}
        for name, value in fields:
            if name in grouped:
                previous = grouped[name]
                grouped[name] = [*previous, value] if isinstance(previous, list) else [previous, value]
            else:
                grouped[name] = value
        return grouped
    return None


def _strict_json(body: bytes) -> Any:
    """Strict JSON: UTF-8 only, and no NaN or Infinity, which inboxd would refuse as not JSON."""

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(body.decode("utf-8"), parse_constant=refuse)
