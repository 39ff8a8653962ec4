"""Payloads as bytes with a content type: which types are JSON, and the bytes an Accept sends.

inboxd stores every payload byte for byte with its media type. A JSON type
(`application/json`, or any `+json` suffix, parameters such as charset
ignored) was validated as JSON by the server, so it parses; any other type
(a form, XML, text, binary) is bytes the handler reads as they came.
"""

from __future__ import annotations

import json
import re
from typing import Any

from inboxd_client.outcomes import PermanentError

# What an Accept without a content type stores, and what an event from a
# server older than ClaimedEvent.content_type was (it stored JSON only).
DEFAULT_CONTENT_TYPE = "application/json"
# A media type's characters (RFC 9110's token, and the slash): the server's
# rule (inboxd.domain.validation.is_json_type), which decided whether it
# validated the payload as JSON; tests/client/test_payloads.py keeps the two in step.
_MEDIA_TYPE = re.compile(r"[A-Za-z0-9!#$&^_.+/-]+")


def is_json(content_type: str) -> bool:
    """True for `application/json` and any `type/subtype+json`, parameters and case aside; "" is JSON (the default)."""
    media = (content_type or DEFAULT_CONTENT_TYPE).split(";", 1)[0].strip(" \t")
    if not _MEDIA_TYPE.fullmatch(media):
        return False
    media = media.lower()
    return media == DEFAULT_CONTENT_TYPE or (media.endswith("+json") and "/" in media[:-5])


class NotJsonPayload(PermanentError, ValueError):
    """`json()` was asked of a payload whose content type is not JSON: read its bytes instead.

    A PermanentError, so a handler that lets it escape dead-letters its event
    at once: the same bytes under the same type cannot parse on a retry.
    """

    def __init__(self, content_type: str) -> None:
        super().__init__(
            f"the payload's content type is {content_type!r}, not JSON (application/json or +json):"
            " read its bytes (ctx.payload) instead of ctx.json()"
        )
        self.content_type = content_type


def parse_json(payload: bytes, content_type: str) -> Any:
    """The payload as a JSON value; raises NotJsonPayload, naming the type, unless the type is JSON."""
    if not is_json(content_type):
        raise NotJsonPayload(content_type)
    return json.loads(payload)


def payload_bytes(payload: object, content_type: str = "") -> bytes:
    """The bytes to send: bytes-like pass as they are; under a JSON type anything else is written with json.dumps.

    Under any other type a `str` is sent as its UTF-8 bytes, and other values
    are refused: there is no single way to write a dict as a form or as XML.
    Under a JSON type a `str` is a JSON string value, as it always was; pass
    bytes to send JSON text as it is.
    """
    if isinstance(payload, bytes | bytearray | memoryview):
        return bytes(payload)
    if is_json(content_type):
        return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    if isinstance(payload, str):
        return payload.encode()
    raise TypeError(
        f"a payload of content type {content_type!r} must be bytes or str, not {type(payload).__name__}:"
        " only a JSON type writes other values (as JSON)"
    )
