"""Signature verifiers: is this raw body really from the provider, and recent enough not to be a replay?

Each verifier reads only the raw body bytes and the headers, before anything
parses the body. Every configured secret is tried, so a secret can be rotated
without dropping deliveries signed with the old one. Error reasons are short
and fixed: they are logged, and never carry a secret or the body.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


class SignatureError(Exception):
    """The request is unsigned, badly signed, or outside the timestamp tolerance; the edge answers 401."""


class Verifier(Protocol):
    """Checks one request's signature; raises SignatureError when it does not hold."""

    def verify(self, body: bytes, headers: Mapping[str, str], now: float, url: str = "", method: str = "POST") -> None:
        """`url` is the public URL the provider called, for a scheme that signs it (`signs_url`); `method` its verb."""
        ...

    @property
    def signed_headers(self) -> frozenset[str]:
        """The headers (lowercase) whose values the signature covers besides the body: a source may trust these."""
        ...

    @property
    def input_headers(self) -> tuple[str, ...]:
        """Every header (lowercase) the check reads: stored with the event, so it can be verified again."""
        ...

    @property
    def signs_url(self) -> bool:
        """True when the provider signs the URL it called (Twilio): the route must name its public URL."""
        ...


def header_value(headers: Mapping[str, str], name: str) -> str | None:
    """A header by case-insensitive name, whatever mapping the caller has."""
    wanted = name.lower()
    for key, value in headers.items():
        if key.lower() == wanted:
            return value
    return None


def check_timestamp(raw: str | None, now: float, tolerance: float) -> str:
    """The timestamp as sent (stripped), once it is a whole number within `tolerance` of `now`."""
    if not raw:
        raise SignatureError("missing timestamp")
    try:
        stamp = int(raw.strip())
    except ValueError:
        raise SignatureError("malformed timestamp") from None
    # Both directions: a far-future stamp would otherwise stay replayable for longer.
    if abs(now - stamp) > tolerance:
        raise SignatureError("timestamp outside tolerance")
    return raw.strip()


# Svix sends its own names for the Standard Webhooks headers (white-labelled senders send webhook-*): both are read.
STANDARD_HEADERS = ("webhook-id", "webhook-timestamp", "webhook-signature")
SVIX_HEADERS = ("svix-id", "svix-timestamp", "svix-signature")


def standard_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The webhook-* values of a Standard Webhooks delivery, read from svix-* or else webhook-* (as Svix's library)."""
    found: dict[str, str] = {}
    for standard, svix in zip(STANDARD_HEADERS, SVIX_HEADERS, strict=True):
        value = header_value(headers, svix) or header_value(headers, standard)
        if value:
            found[standard] = value
    return found


@dataclass(frozen=True)
class StandardWebhooksVerifier:
    """Standard Webhooks (webhook-id, webhook-timestamp, webhook-signature, or Svix's svix-* names for them).

    HMAC-SHA256 of "{id}.{timestamp}.{body}" with the base64 secret after ``whsec_``; the signature header is
    a space-separated list of ``v1,<base64>`` entries (several while the sender rotates its secret). A ``v1a,``
    entry is the spec's asymmetric signature (Ed25519 over the same content): verified against the route's
    ``whpk_`` public keys when it lists any, skipped otherwise, never a match by itself.
    """

    secrets: tuple[bytes, ...]
    tolerance: float
    public_keys: tuple[Ed25519PublicKey, ...] = ()

    @classmethod
    def from_secrets(cls, secrets: Sequence[str], tolerance: float) -> StandardWebhooksVerifier:
        """Raises ValueError for a secret that is not whsec_ + base64 (or a public key not whpk_ + base64)."""
        keys: list[bytes] = []
        public: list[Ed25519PublicKey] = []
        for secret in secrets:
            if secret.startswith("whpk_"):
                try:
                    public.append(Ed25519PublicKey.from_public_bytes(base64.b64decode(secret[5:], validate=True)))
                except (ValueError, binascii.Error):
                    raise ValueError("a standard-webhooks public key is not whpk_ + base64 of 32 bytes") from None
                continue
            # Strictly: a lenient decoder skips characters that are not base64, so a mangled secret would
            # load and then reject every delivery.
            encoded = secret.removeprefix("whsec_")
            try:
                keys.append(base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True))
            except (ValueError, binascii.Error):
                raise ValueError("a standard-webhooks secret is not whsec_ + base64") from None
        return cls(tuple(keys), tolerance, tuple(public))

    @property
    def signed_headers(self) -> frozenset[str]:
        return frozenset({"webhook-id", "webhook-timestamp", "svix-id", "svix-timestamp"})

    @property
    def input_headers(self) -> tuple[str, ...]:
        return STANDARD_HEADERS + SVIX_HEADERS

    @property
    def signs_url(self) -> bool:
        return False

    def verify(self, body: bytes, headers: Mapping[str, str], now: float, url: str = "", method: str = "POST") -> None:
        wanted = standard_headers(headers)
        if len(wanted) != len(STANDARD_HEADERS):
            raise SignatureError("missing signature")
        stamp = check_timestamp(wanted["webhook-timestamp"], now, self.tolerance)
        content = f"{wanted['webhook-id']}.{stamp}.".encode() + body
        offered: dict[str, list[bytes]] = {"v1": [], "v1a": []}
        for entry in wanted["webhook-signature"].split():
            version, _, encoded = entry.partition(",")
            if version not in offered:
                continue
            try:
                offered[version].append(base64.b64decode(encoded, validate=True))
            except (ValueError, binascii.Error):
                continue
        for key in self.public_keys:
            for signature in offered["v1a"]:
                try:
                    key.verify(signature, content)
                    return
                except InvalidSignature:
                    continue
        for secret in self.secrets:
            expected = hmac.new(secret, content, hashlib.sha256).digest()
            if any(hmac.compare_digest(expected, s) for s in offered["v1"]):
                return
        raise SignatureError("no matching signature")
