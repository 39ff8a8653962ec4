"""Providers that prove a delivery with a shared value instead of a signature: GitLab's token, Graph's clientState.

Neither value covers the body, so neither proves the body unchanged: they
prove the sender knew the value, as a password does. Neither is ever stored
with the event (no ``inboxd.signature.*`` entry, and the edge drops Graph's
``clientState`` from each item it forwards), since a worker reading the
event must not learn it.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass

from inboxd_edge.signatures import SignatureError, header_value


@dataclass(frozen=True)
class TokenVerifier:
    """A header that must equal one of the route's secrets (GitLab's X-Gitlab-Token)."""

    header: str
    secrets: tuple[bytes, ...]

    @property
    def signed_headers(self) -> frozenset[str]:
        return frozenset()

    @property
    def input_headers(self) -> tuple[str, ...]:
        # The token is the secret itself: never stored.
        return ()

    @property
    def signs_url(self) -> bool:
        return False

    def verify(self, body: bytes, headers: Mapping[str, str], now: float, url: str = "", method: str = "POST") -> None:
        offered = header_value(headers, self.header)
        if not offered:
            raise SignatureError("missing token")
        if not any(hmac.compare_digest(offered.encode(), s) for s in self.secrets):
            raise SignatureError("no matching token")


@dataclass(frozen=True)
class ClientStateVerifier:
    """Microsoft Graph: every item of the body's ``value`` carries ``clientState`` equal to the route's value."""

    secrets: tuple[bytes, ...]

    @property
    def signed_headers(self) -> frozenset[str]:
        return frozenset()

    @property
    def input_headers(self) -> tuple[str, ...]:
        return ()

    @property
    def signs_url(self) -> bool:
        return False

    def verify(self, body: bytes, headers: Mapping[str, str], now: float, url: str = "", method: str = "POST") -> None:
        try:
            items = json.loads(body).get("value")
        except (ValueError, AttributeError):
            raise SignatureError("body is not a notification collection") from None
        if not isinstance(items, list) or not items:
            raise SignatureError("body is not a notification collection")
        for item in items:
            state = item.get("clientState") if isinstance(item, dict) else None
            if not isinstance(state, str) or not any(hmac.compare_digest(state.encode(), s) for s in self.secrets):
                # One item without the route's value refuses the whole delivery: Graph retries it whole.
                raise SignatureError("client state does not match")
