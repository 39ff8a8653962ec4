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

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

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


@dataclass(frozen=True)
class StandardWebhooksVerifier:
    """Standard Webhooks (webhook-id, webhook-timestamp, webhook-signature), through the `standardwebhooks` library."""

    secrets: tuple[Webhook, ...]
    tolerance: float

    @classmethod
    def from_secrets(cls, secrets: Sequence[str], tolerance: float) -> StandardWebhooksVerifier:
        """Raises ValueError for a secret that is not whsec_ + base64."""
        try:
            for secret in secrets:
                # The library skips characters that are not base64, so a mangled secret would
                # load and then reject every delivery; check it strictly here instead.
                encoded = secret.removeprefix("whsec_")
                base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
            return cls(tuple(Webhook(s) for s in secrets), tolerance)
        except Exception as exc:  # the library raises binascii.Error or its own types
            raise ValueError("a standard-webhooks secret is not whsec_ + base64") from exc

    @property
    def signed_headers(self) -> frozenset[str]:
        # The library signs "{webhook-id}.{webhook-timestamp}.{body}".
        return frozenset({"webhook-id", "webhook-timestamp"})

    @property
    def input_headers(self) -> tuple[str, ...]:
        return ("webhook-id", "webhook-timestamp", "webhook-signature")

    @property
    def signs_url(self) -> bool:
        return False

    def verify(self, body: bytes, headers: Mapping[str, str], now: float, url: str = "") -> None:
        wanted = {name: header_value(headers, name) for name in self.input_headers}
        if not all(wanted.values()):
            raise SignatureError("missing signature")
        # The library's own window is a fixed 5 minutes; ours is configurable (and checked first).
        _check_timestamp(wanted["webhook-timestamp"], now, self.tolerance)
        plain = {k: v for k, v in wanted.items() if v is not None}
        for secret in self.secrets:
            try:
                secret.verify(body, plain, json_parse=False)
                return
            except WebhookVerificationError:
                continue
            except ValueError:
                # A signature list the library cannot split or decode, or a body that is not UTF-8.
                break
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
