"""Developer tools: GitHub and the other code, deploy and incident services."""

from __future__ import annotations

from collections.abc import Mapping

from inboxd_edge.hmac_template import HmacScheme
from inboxd_edge.presets.base import Preset

PRESETS: Mapping[str, Preset] = {
    # GitHub: "sha256=" + hex HMAC-SHA256 of the body, no timestamp. X-GitHub-Delivery and X-GitHub-Event
    # are not signed, and the body names no event id: the key is the body's SHA-256 (a redelivery resends
    # the same bytes), the delivery GUID goes to metadata. The type is the route's (const:, one webhook and
    # secret per event type), or X-GitHub-Event for a GitHub App's one webhook (inboxd_edge.identity).
    "github": Preset(
        "hmac",
        HmacScheme(signature_headers=("X-Hub-Signature-256",), signed_content="{body}", signature_prefix="sha256="),
        defaults={"event_key": "digest:sha256", "delivery_id": "header:X-GitHub-Delivery"},
        handshake="github",
    ),
}
