"""Conflicting copies of a key, bounded: how many are kept whole, and how an operator pages through them.

A copy that arrives under an existing key with another type or payload is kept
for investigation. A sender who repeats one key with ever new payloads must not
grow the store, nor every read of the event, without bound: the first
KEPT_CONFLICT_COPIES copies are kept whole, the rest counted with the digest of
the last (the statement that keeps them, `event_accept_many`, says the same
number). A read pages through the kept copies and loads their payloads only
when asked; each copy carries its payload's SHA-256 and size either way.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import datetime

from inboxd.domain.errors import InvalidArgument

KEPT_CONFLICT_COPIES = 20
DEFAULT_CONFLICTS_PAGE = 20
MAX_CONFLICTS_PAGE = 100
_TOKEN_VERSION = "c1."


@dataclass(frozen=True, slots=True)
class ConflictWindow:
    """Which kept copies a read returns: those after `after_id`, `page_size` of them, payloads or not."""

    after_id: int = 0
    page_size: int = DEFAULT_CONFLICTS_PAGE
    with_payloads: bool = False

    def __post_init__(self) -> None:
        if not 1 <= self.page_size <= MAX_CONFLICTS_PAGE:
            raise InvalidArgument("conflicts_page_size", f"is {self.page_size}; 1..{MAX_CONFLICTS_PAGE}, 0 for 20")


@dataclass(frozen=True, slots=True)
class ConflictOverflow:
    """The copies past the kept ones: how many, when, and the last one's payload digest."""

    copies: int
    first_received_at: datetime
    last_received_at: datetime
    last_payload_sha256: bytes


def encode_conflicts_token(after_id: int) -> str:
    """An opaque token for the kept copies after the copy `after_id`."""
    return _TOKEN_VERSION + base64.urlsafe_b64encode(str(after_id).encode()).decode("ascii").rstrip("=")


def decode_conflicts_token(token: str) -> int:
    """The copy a token continues after; raises InvalidArgument for anything encode_conflicts_token did not make."""
    if not token.startswith(_TOKEN_VERSION):
        raise InvalidArgument("conflicts_page_token", "is not a token from a previous GetEventResponse")
    data = token[len(_TOKEN_VERSION) :]
    try:
        after_id = int(base64.urlsafe_b64decode(data + "=" * (-len(data) % 4)).decode("ascii"))
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidArgument("conflicts_page_token", "is damaged: pass it exactly as received") from None
    if after_id < 0:
        raise InvalidArgument("conflicts_page_token", "is damaged: pass it exactly as received")
    return after_id


# The first page of copies, without payloads: what a read gets unless it asks for more.
FIRST_PAGE = ConflictWindow()
