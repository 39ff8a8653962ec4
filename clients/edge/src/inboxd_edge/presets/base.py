"""What a scheme name stands for: a verifier, its settings, the route's default sources, tolerance and handshake."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from inboxd_edge.asymmetric import AsymmetricScheme
from inboxd_edge.hmac_template import HmacScheme

# A signed request's replay window in seconds, when neither the route nor its provider's preset names one.
DEFAULT_TOLERANCE_SECONDS = 300.0

VerifierKind = Literal[
    "standard-webhooks", "hmac", "twilio", "ed25519", "ecdsa", "token", "client-state", "mailgun", "mandrill"
]
# The provider's URL check, answered before the signature gate (inboxd_edge.handshakes).
HandshakeKind = Literal[
    "slack", "meta", "zoom", "twitch", "microsoft-graph", "discord", "github", "mandrill", "trello", "intercom"
]


@dataclass(frozen=True)
class Preset:
    """What a scheme name stands for: which verifier, and default sources and settings for the route."""

    verifier: VerifierKind
    hmac: HmacScheme | None = None
    # Route field -> source text, used when the route does not set the field.
    defaults: Mapping[str, str] = field(default_factory=dict)
    # The provider's own replay window in seconds, when it names one (the route's tolerance_seconds wins).
    tolerance: float | None = None
    handshake: HandshakeKind | None = None
    asymmetric: AsymmetricScheme | None = None
    # A body that holds several events (Microsoft Graph's "value"): a JSON pointer to the array, each item an event.
    items: str | None = None
