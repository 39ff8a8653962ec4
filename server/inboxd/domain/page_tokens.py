"""ListEvents page tokens: an opaque, versioned encoding of a keyset position.

A token names the last event of a page (its accepted_at, namespace and key),
not an offset, so a page never skips or repeats events when others arrive
or change state meanwhile. It is opaque to callers and carries no secret:
it only repeats what the previous page already showed.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime, timedelta

from inboxd.domain.errors import InvalidArgument
from inboxd.domain.operator_views import ListPosition
from inboxd.domain.validation import MAX_IDENTITY_BYTES, check_text

_VERSION = "p1."
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def encode_page_token(position: ListPosition) -> str:
    micros = (position.accepted_at - _EPOCH) // timedelta(microseconds=1)
    body = json.dumps([micros, position.namespace, position.event_key], separators=(",", ":"))
    return _VERSION + base64.urlsafe_b64encode(body.encode("utf-8")).decode("ascii").rstrip("=")


def decode_page_token(token: str) -> ListPosition:
    """Raises InvalidArgument for anything encode_page_token did not make."""
    if not token.startswith(_VERSION):
        raise InvalidArgument("page_token", "is not a token from a previous ListEventsResponse")
    data = token[len(_VERSION) :]
    try:
        raw = base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))
        micros, namespace, event_key = json.loads(raw.decode("utf-8"))
        if not isinstance(micros, int) or not isinstance(namespace, str) or not isinstance(event_key, str):
            raise ValueError("unexpected field types")
        accepted_at = _EPOCH + timedelta(microseconds=micros)
    except (binascii.Error, UnicodeDecodeError, ValueError, TypeError, OverflowError):
        raise InvalidArgument("page_token", "is damaged: pass next_page_token exactly as received") from None
    # A token is the caller's text: a NUL or a lone surrogate in it must not reach PostgreSQL.
    check_text("page_token", namespace, MAX_IDENTITY_BYTES)
    check_text("page_token", event_key, MAX_IDENTITY_BYTES)
    return ListPosition(accepted_at, namespace, event_key)
