"""The signature schemes a route may name, with the provider's defaults, one module per family of providers.

A route names a scheme; any field a preset sets can still be overridden in the
route's ``[routes.hmac]`` table or by the route's own source settings. Each
provider's own documentation is the authority for its preset; where it leaves
a detail open, the preset says what it assumed in a comment.
"""

from __future__ import annotations

from collections.abc import Mapping

from inboxd_edge.presets import code, commerce, general, messaging, platforms, saas
from inboxd_edge.presets.base import HandshakeKind, Preset, VerifierKind

PRESETS: Mapping[str, Preset] = {
    **general.PRESETS,
    **commerce.PRESETS,
    **code.PRESETS,
    **messaging.PRESETS,
    **platforms.PRESETS,
    **saas.PRESETS,
}

__all__ = ["PRESETS", "HandshakeKind", "Preset", "VerifierKind"]
