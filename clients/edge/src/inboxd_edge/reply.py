"""What one request came to: the answer for the provider, and what its log line and span say."""

from __future__ import annotations

from dataclasses import dataclass

from inboxd_edge.forward import Answer
from inboxd_edge.handshakes import Handshake
from inboxd_edge.keys import ResolvedEvent


@dataclass(frozen=True)
class Reply:
    """What one request came to, for the response and the log line."""

    answer: Answer
    reason: str = ""
    event_type: str = ""
    delivery_id: str = ""
    # The event as named and sent to Accept (None when the request stopped before): for the request's span.
    event: ResolvedEvent | None = None
    # A provider's URL check: answered with its own body, nothing sent to inboxd.
    handshake: Handshake | None = None
