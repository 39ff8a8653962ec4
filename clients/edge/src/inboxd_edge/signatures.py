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
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

Encoding = Literal["hex", "base64"]


class SignatureError(Exception):
    """The request is unsigned, badly signed, or outside the timestamp tolerance; the edge answers 401."""


class Verifier(Protocol):
    """Checks one request's signature; raises SignatureError when it does not hold."""

    def verify(self, body: bytes, headers: Mapping[str, str], now: float, url: str = "") -> None:
        """`url` is the public URL the provider called, for a scheme that signs it (`signs_url`)."""
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


def _check_timestamp(raw: str | None, now: float, tolerance: float) -> str:
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
    entry is an asymmetric signature, which this verifier has no key for: it is skipped, never a match.
    """

    secrets: tuple[bytes, ...]
    tolerance: float

    @classmethod
    def from_secrets(cls, secrets: Sequence[str], tolerance: float) -> StandardWebhooksVerifier:
        """Raises ValueError for a secret that is not whsec_ + base64."""
        keys: list[bytes] = []
        for secret in secrets:
            # Strictly: a lenient decoder skips characters that are not base64, so a mangled secret would
            # load and then reject every delivery.
            encoded = secret.removeprefix("whsec_")
            try:
                keys.append(base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True))
            except (ValueError, binascii.Error):
                raise ValueError("a standard-webhooks secret is not whsec_ + base64") from None
        return cls(tuple(keys), tolerance)

    @property
    def signed_headers(self) -> frozenset[str]:
        return frozenset({"webhook-id", "webhook-timestamp", "svix-id", "svix-timestamp"})

    @property
    def input_headers(self) -> tuple[str, ...]:
        return STANDARD_HEADERS + SVIX_HEADERS

    @property
    def signs_url(self) -> bool:
        return False

    def verify(self, body: bytes, headers: Mapping[str, str], now: float, url: str = "") -> None:
        wanted = standard_headers(headers)
        if len(wanted) != len(STANDARD_HEADERS):
            raise SignatureError("missing signature")
        stamp = _check_timestamp(wanted["webhook-timestamp"], now, self.tolerance)
        content = f"{wanted['webhook-id']}.{stamp}.".encode() + body
        offered: list[bytes] = []
        for entry in wanted["webhook-signature"].split():
            version, _, encoded = entry.partition(",")
            if version != "v1":
                continue
            try:
                offered.append(base64.b64decode(encoded, validate=True))
            except (ValueError, binascii.Error):
                continue
        for secret in self.secrets:
            expected = hmac.new(secret, content, hashlib.sha256).digest()
            if any(hmac.compare_digest(expected, s) for s in offered):
                return
        raise SignatureError("no matching signature")


@dataclass(frozen=True)
class StripeVerifier:
    """Stripe's Stripe-Signature: ``t=<unix>,v1=<hex>`` with HMAC-SHA256 over ``"{t}.{body}"``."""

    secrets: tuple[bytes, ...]
    tolerance: float
    header: str = "Stripe-Signature"

    @property
    def signed_headers(self) -> frozenset[str]:
        # The timestamp rides inside Stripe-Signature itself; no other header is signed.
        return frozenset()

    @property
    def input_headers(self) -> tuple[str, ...]:
        return (self.header.lower(),)

    @property
    def signs_url(self) -> bool:
        return False

    def verify(self, body: bytes, headers: Mapping[str, str], now: float, url: str = "") -> None:
        value = header_value(headers, self.header)
        if not value:
            raise SignatureError("missing signature")
        stamps: list[str] = []
        signatures: list[str] = []
        for item in value.split(","):
            key, _, part = item.strip().partition("=")
            if key == "t":
                stamps.append(part)
            elif key == "v1":
                signatures.append(part)
        if len(stamps) != 1 or not signatures:
            raise SignatureError("malformed signature header")
        stamp = _check_timestamp(stamps[0], now, self.tolerance)
        content = stamp.encode() + b"." + body
        for secret in self.secrets:
            expected = hmac.new(secret, content, hashlib.sha256).hexdigest()
            if any(hmac.compare_digest(expected, s) for s in signatures):
                return
        raise SignatureError("no matching signature")


@dataclass(frozen=True)
class HmacScheme:
    """A provider's own HMAC-SHA256 convention: which headers, which signed bytes, which encoding."""

    signature_headers: tuple[str, ...]
    timestamp_header: str | None = None
    # What is signed: "{body}" exactly once, "{timestamp}" where the provider puts it.
    signed_content: str = "{timestamp}.{body}"
    encoding: Encoding = "hex"
    # Stripped from each signature when present, e.g. "sha256=".
    signature_prefix: str = ""

    def __post_init__(self) -> None:
        if not self.signature_headers:
            raise ValueError("an hmac scheme needs at least one signature header")
        if self.signed_content.count("{body}") != 1:
            raise ValueError("signed_content must contain {body} exactly once")
        leftover = re.sub(r"\{(body|timestamp)\}", "", self.signed_content)
        if "{" in leftover or "}" in leftover:
            raise ValueError("signed_content may use only {timestamp} and {body}")
        if "{timestamp}" in self.signed_content and not self.timestamp_header:
            raise ValueError("signed_content uses {timestamp} but no timestamp_header is set")
        if self.encoding not in ("hex", "base64"):
            raise ValueError("encoding must be hex or base64")


@dataclass(frozen=True)
class HmacVerifier:
    """Verifies an `HmacScheme`; a timestamp header, when the scheme has one, is held to the tolerance."""

    scheme: HmacScheme
    secrets: tuple[bytes, ...]
    tolerance: float

    @property
    def signed_headers(self) -> frozenset[str]:
        stamp = self.scheme.timestamp_header
        return frozenset({stamp.lower()}) if stamp and "{timestamp}" in self.scheme.signed_content else frozenset()

    @property
    def input_headers(self) -> tuple[str, ...]:
        stamp = self.scheme.timestamp_header
        return tuple(h.lower() for h in self.scheme.signature_headers) + ((stamp.lower(),) if stamp else ())

    @property
    def signs_url(self) -> bool:
        return False

    def verify(self, body: bytes, headers: Mapping[str, str], now: float, url: str = "") -> None:
        value = next((v for name in self.scheme.signature_headers if (v := header_value(headers, name))), None)
        if not value:
            raise SignatureError("missing signature")
        stamp = ""
        if self.scheme.timestamp_header:
            stamp = _check_timestamp(header_value(headers, self.scheme.timestamp_header), now, self.tolerance)
        before, after = self.scheme.signed_content.split("{body}")
        content = before.replace("{timestamp}", stamp).encode() + body + after.replace("{timestamp}", stamp).encode()
        offered = self._decode_all(value)
        for secret in self.secrets:
            expected = hmac.new(secret, content, hashlib.sha256).digest()
            if any(hmac.compare_digest(expected, s) for s in offered):
                return
        raise SignatureError("no matching signature")

    def _decode_all(self, value: str) -> list[bytes]:
        """Every signature in the header; a sender rotating its secret may list several."""
        decoded: list[bytes] = []
        prefix = self.scheme.signature_prefix
        for item in re.split(r"[\s,]+", value.strip()):
            part = item[len(prefix) :] if prefix and item.startswith(prefix) else item
            try:
                if self.scheme.encoding == "hex":
                    decoded.append(bytes.fromhex(part))
                else:
                    decoded.append(base64.b64decode(part, validate=True))
            except (ValueError, binascii.Error):
                continue
        return decoded
