"""The HMAC template: one verifier for every provider that signs with a shared secret, described by settings.

A route's ``[routes.hmac]`` table (or a preset) says which header carries the
signature, which algorithm and encoding, and what was signed: ``signed_content``
is a template over ``{body}`` (the raw bytes, exactly once), ``{timestamp}``,
``{id}`` (the ``id_header``'s value), ``{url}`` (the public URL the provider
called, for providers that sign it) and ``{method}``. A signature header holds
either a list of signatures (separated by spaces or commas, each with an
optional ``signature_prefix``) or ``key=value`` pairs, Stripe's
``t=...,v1=...``, with the timestamp's and the signatures' key names and the
pairs' separator configurable. Every signature in the header is tried against
every secret, so both sides may rotate.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, Literal

from inboxd_edge.signatures import SignatureError, check_timestamp, header_value
from inboxd_edge.sources import walk

Algorithm = Literal["sha1", "sha256", "sha512"]
Encoding = Literal["hex", "base64"]
SignatureFormat = Literal["list", "pairs"]
TimestampUnit = Literal["seconds", "milliseconds", "rfc3339"]
SecretEncoding = Literal["text", "base64"]

_PLACEHOLDERS = ("body", "timestamp", "id", "url", "method")
_CHOICES: Mapping[str, tuple[str, ...]] = {
    "algorithm": ("sha1", "sha256", "sha512"),
    "encoding": ("hex", "base64"),
    "signature_format": ("list", "pairs"),
    "timestamp_unit": ("seconds", "milliseconds", "rfc3339"),
    "secret_encoding": ("text", "base64"),
}


@dataclass(frozen=True)
class HmacScheme:
    """A provider's HMAC convention: which headers, which signed bytes, which algorithm and encoding."""

    signature_headers: tuple[str, ...]
    algorithm: Algorithm = "sha256"
    timestamp_header: str | None = None
    id_header: str | None = None
    # What is signed: "{body}" exactly once, the other placeholders where the provider puts them.
    signed_content: str = "{timestamp}.{body}"
    encoding: Encoding = "hex"
    # Stripped from each signature when present, e.g. "sha256=".
    signature_prefix: str = ""
    # "pairs": the header is key=value pairs (Stripe's t=...,v1=...): the timestamp under timestamp_key (unless a
    # timestamp_header is set), each signature under signature_key.
    signature_format: SignatureFormat = "list"
    pair_separator: str = ","
    timestamp_key: str = "t"
    signature_key: str = "v1"
    timestamp_unit: TimestampUnit = "seconds"
    # A JSON pointer to a timestamp inside the (signed) body, for a provider that puts it there (Linear).
    timestamp_body: str | None = None
    # "base64": the secret is base64 (after an optional "whsec_"), as Svix-style senders hand it out.
    secret_encoding: SecretEncoding = "text"

    def __post_init__(self) -> None:
        if not self.signature_headers:
            raise ValueError("an hmac scheme needs at least one signature header")
        for name, allowed in _CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(allowed)}, not {getattr(self, name)!r}")
        if self.signed_content.count("{body}") != 1:
            raise ValueError("signed_content must contain {body} exactly once")
        leftover = re.sub(r"\{(" + "|".join(_PLACEHOLDERS) + r")\}", "", self.signed_content)
        if "{" in leftover or "}" in leftover:
            raise ValueError("signed_content may use only " + ", ".join("{" + p + "}" for p in _PLACEHOLDERS))
        if self.uses("timestamp") and not self.timestamp_header and self.signature_format != "pairs":
            raise ValueError("signed_content uses {timestamp} but no timestamp_header is set")
        if self.uses("id") and not self.id_header:
            raise ValueError("signed_content uses {id} but no id_header is set")
        if self.timestamp_body is not None and (self.timestamp_header or not self.timestamp_body.startswith("/")):
            raise ValueError("timestamp_body is a JSON pointer (/webhookTimestamp), instead of a timestamp_header")
        if not self.pair_separator:
            raise ValueError("pair_separator must not be empty")

    def uses(self, placeholder: str) -> bool:
        """True when the signed content has ``{placeholder}``."""
        return "{" + placeholder + "}" in self.signed_content


def hmac_scheme(base: HmacScheme | None, overrides: Mapping[str, Any]) -> HmacScheme:
    """A preset's scheme with a route's [routes.hmac] settings over it; raises ValueError naming an unknown key."""
    names = [f.name for f in fields(HmacScheme)]
    if unknown := sorted(set(overrides) - set(names)):
        raise ValueError(f"[routes.hmac] has no setting {', '.join(map(repr, unknown))}; it takes {', '.join(names)}")
    merged = {**({name: getattr(base, name) for name in names} if base else {}), **overrides}
    if "signature_headers" not in merged:
        raise ValueError("[routes.hmac] needs signature_headers, the header(s) the signature comes in")
    if isinstance(merged["signature_headers"], str):
        merged["signature_headers"] = (merged["signature_headers"],)
    merged["signature_headers"] = tuple(str(h) for h in merged["signature_headers"])
    return HmacScheme(**merged)


@dataclass(frozen=True)
class HmacVerifier:
    """Verifies an `HmacScheme`; a timestamp, when the scheme has one, is held to the tolerance."""

    scheme: HmacScheme
    secrets: tuple[bytes, ...]
    tolerance: float

    @classmethod
    def from_secrets(cls, scheme: HmacScheme, secrets: list[str], tolerance: float) -> HmacVerifier:
        """Raises ValueError for a secret the scheme's secret_encoding cannot decode."""
        if scheme.secret_encoding == "text":
            return cls(scheme, tuple(s.encode() for s in secrets), tolerance)
        keys = []
        for secret in secrets:
            encoded = secret.removeprefix("whsec_")
            try:
                keys.append(base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True))
            except (ValueError, binascii.Error):
                raise ValueError("a secret is not base64 (secret_encoding = 'base64')") from None
        return cls(scheme, tuple(keys), tolerance)

    @property
    def signed_headers(self) -> frozenset[str]:
        signed = set()
        if self.scheme.timestamp_header and self.scheme.uses("timestamp"):
            signed.add(self.scheme.timestamp_header.lower())
        if self.scheme.id_header and self.scheme.uses("id"):
            signed.add(self.scheme.id_header.lower())
        return frozenset(signed)

    @property
    def input_headers(self) -> tuple[str, ...]:
        extra = (self.scheme.timestamp_header, self.scheme.id_header)
        return tuple(h.lower() for h in (*self.scheme.signature_headers, *extra) if h)

    @property
    def signs_url(self) -> bool:
        return self.scheme.uses("url")

    def verify(self, body: bytes, headers: Mapping[str, str], now: float, url: str = "", method: str = "POST") -> None:
        scheme = self.scheme
        value = next((v for name in scheme.signature_headers if (v := header_value(headers, name))), None)
        if not value:
            raise SignatureError("missing signature")
        if scheme.signature_format == "pairs":
            stamp, encoded = _pairs(value, scheme)
        else:
            stamp, encoded = None, [_unprefixed(s, scheme.signature_prefix) for s in re.split(r"[\s,]+", value.strip())]
        if scheme.timestamp_header:
            stamp = header_value(headers, scheme.timestamp_header)
        elif scheme.timestamp_body:
            stamp = _body_stamp(body, scheme.timestamp_body)
        if stamp is not None or scheme.timestamp_header or scheme.timestamp_body:
            stamp = _check_stamp(stamp, scheme.timestamp_unit, now, self.tolerance)
        values = {"timestamp": stamp or "", "url": url, "method": method.upper(), "id": ""}
        if scheme.id_header:
            values["id"] = header_value(headers, scheme.id_header) or ""
            if not values["id"] and scheme.uses("id"):
                raise SignatureError("missing id")
        before, after = scheme.signed_content.split("{body}")
        content = _filled(before, values) + body + _filled(after, values)
        offered = [d for s in encoded if (d := _decoded(s, scheme.encoding)) is not None]
        for secret in self.secrets:
            expected = hmac.new(secret, content, scheme.algorithm).digest()
            if any(hmac.compare_digest(expected, s) for s in offered):
                return
        raise SignatureError("no matching signature")


def _pairs(value: str, scheme: HmacScheme) -> tuple[str | None, list[str]]:
    stamps: list[str] = []
    signatures: list[str] = []
    for item in value.split(scheme.pair_separator):
        key, _, part = item.strip().partition("=")
        if key == scheme.timestamp_key:
            stamps.append(part)
        elif key == scheme.signature_key:
            signatures.append(_unprefixed(part, scheme.signature_prefix))
    needs_stamp = not scheme.timestamp_header and scheme.uses("timestamp")
    if not signatures or len(stamps) > 1 or (needs_stamp and len(stamps) != 1):
        raise SignatureError("malformed signature header")
    return (stamps[0] if stamps else None), signatures


def _body_stamp(body: bytes, pointer: str) -> str | None:
    """The timestamp at `pointer` in a JSON body (checked once the signature holds: a stale body fails either way)."""
    try:
        document = json.loads(body)
    except ValueError:
        return None
    value = walk(document, tuple(t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")))
    return str(value) if isinstance(value, str | int) and not isinstance(value, bool) else None


def _check_stamp(raw: str | None, unit: TimestampUnit, now: float, tolerance: float) -> str:
    """The timestamp as sent, once it is within the tolerance (in the provider's unit)."""
    if not raw:
        raise SignatureError("missing timestamp")
    if unit == "seconds":
        return check_timestamp(raw, now, tolerance)
    if unit == "milliseconds":
        check_timestamp(raw, now * 1000, tolerance * 1000)
        return raw.strip()
    # RFC 3339, as Twitch sends it: nanoseconds and a "Z" (fromisoformat takes at most microseconds).
    text = re.sub(r"(\.\d{6})\d+", r"\1", raw.strip()).replace("Z", "+00:00").replace("z", "+00:00")
    try:
        seconds = datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise SignatureError("malformed timestamp") from None
    if abs(now - seconds) > tolerance:
        raise SignatureError("timestamp outside tolerance")
    return raw


def _filled(template: str, values: Mapping[str, str]) -> bytes:
    # One pass: a value (a URL's query, an id) that holds "{...}" text is never filled in again.
    return re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], template).encode()


def _unprefixed(signature: str, prefix: str) -> str:
    return signature[len(prefix) :] if prefix and signature.startswith(prefix) else signature


def _decoded(signature: str, encoding: Encoding) -> bytes | None:
    try:
        if encoding == "hex":
            return bytes.fromhex(signature)
        return base64.b64decode(signature, validate=True)
    except (ValueError, binascii.Error):
        return None
