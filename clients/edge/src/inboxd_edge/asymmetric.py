"""Public-key signatures: Ed25519 (Discord, Telnyx) and ECDSA P-256 (SendGrid), keys from the route's file or env.

The provider signs with a private key and publishes the public one, so the
route holds nothing secret (``public_key``, or ``public_key_env`` naming a
variable). Each scheme signs a timestamp header's value and the raw body,
joined as the provider joins them; the timestamp is held to the route's
tolerance. Several keys may be listed, for a provider that rotates its key.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from inboxd_edge.signatures import SignatureError, check_timestamp, header_value

Algorithm = Literal["ed25519", "ecdsa-p256"]
PublicKey = Ed25519PublicKey | ec.EllipticCurvePublicKey


def load_public_key(text: str, algorithm: Algorithm) -> PublicKey:
    """A key as providers hand it out: PEM, or hex (Discord) or base64 (Telnyx, SendGrid) of the raw or DER key."""
    text = text.strip()
    try:
        if text.startswith("-----BEGIN"):
            key = serialization.load_pem_public_key(text.encode())
        else:
            raw = _hex_or_base64(text)
            if algorithm == "ed25519" and len(raw) == 32:
                return Ed25519PublicKey.from_public_bytes(raw)
            key = serialization.load_der_public_key(raw)
    except ValueError as exc:
        if "PEM, hex or base64" in str(exc):
            raise
        raise ValueError(f"the public key is not an {algorithm} key (PEM, or hex or base64 of its bytes)") from None
    if algorithm == "ed25519" and isinstance(key, Ed25519PublicKey):
        return key
    if algorithm == "ecdsa-p256" and isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name == "secp256r1":
        return key
    raise ValueError(f"the public key is not an {algorithm} key")


def _hex_or_base64(text: str) -> bytes:
    try:
        return bytes.fromhex(text)
    except ValueError:
        pass
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (ValueError, binascii.Error):
        raise ValueError("a public key must be PEM, hex or base64") from None


@dataclass(frozen=True)
class AsymmetricScheme:
    """A provider's public-key convention, as a preset names it."""

    algorithm: Algorithm
    signature_header: str
    timestamp_header: str
    signed_content: str
    encoding: Literal["hex", "base64"]


@dataclass(frozen=True)
class PublicKeyVerifier:
    """One provider's public-key scheme: which headers, how the signed bytes are joined, how the signature is coded."""

    algorithm: Algorithm
    keys: tuple[PublicKey, ...]
    signature_header: str
    timestamp_header: str
    # "{timestamp}" and "{body}" joined as the provider joins them, e.g. "{timestamp}|{body}" for Telnyx.
    signed_content: str
    tolerance: float
    # How the signature header is coded: hex (Discord) or base64 (Telnyx, SendGrid).
    encoding: Literal["hex", "base64"] = "base64"

    @classmethod
    def from_keys(
        cls,
        algorithm: Algorithm,
        keys: Sequence[str],
        *,
        signature_header: str,
        timestamp_header: str,
        signed_content: str,
        tolerance: float,
        encoding: Literal["hex", "base64"],
    ) -> PublicKeyVerifier:
        """Raises ValueError for a key that is not of `algorithm`."""
        if signed_content.count("{body}") != 1 or "{timestamp}" not in signed_content:
            raise ValueError("signed_content must hold {timestamp} and {body} once")
        loaded = tuple(load_public_key(k, algorithm) for k in keys)
        return cls(algorithm, loaded, signature_header, timestamp_header, signed_content, tolerance, encoding)

    @classmethod
    def for_scheme(cls, scheme: AsymmetricScheme, keys: Sequence[str], tolerance: float) -> PublicKeyVerifier:
        """The verifier for a preset's scheme with the route's keys; raises ValueError for a key of another kind."""
        return cls.from_keys(
            scheme.algorithm,
            keys,
            signature_header=scheme.signature_header,
            timestamp_header=scheme.timestamp_header,
            signed_content=scheme.signed_content,
            tolerance=tolerance,
            encoding=scheme.encoding,
        )

    @property
    def signed_headers(self) -> frozenset[str]:
        return frozenset({self.timestamp_header.lower()})

    @property
    def input_headers(self) -> tuple[str, ...]:
        return (self.signature_header.lower(), self.timestamp_header.lower())

    @property
    def signs_url(self) -> bool:
        return False

    def verify(self, body: bytes, headers: Mapping[str, str], now: float, url: str = "", method: str = "POST") -> None:
        offered = header_value(headers, self.signature_header)
        if not offered:
            raise SignatureError("missing signature")
        stamp = check_timestamp(header_value(headers, self.timestamp_header), now, self.tolerance)
        before, after = self.signed_content.split("{body}")
        content = before.replace("{timestamp}", stamp).encode() + body + after.replace("{timestamp}", stamp).encode()
        try:
            text = offered.strip()
            signature = bytes.fromhex(text) if self.encoding == "hex" else base64.b64decode(text, validate=True)
        except (ValueError, binascii.Error):
            raise SignatureError("malformed signature") from None
        for key in self.keys:
            try:
                if isinstance(key, Ed25519PublicKey):
                    key.verify(signature, content)
                else:
                    key.verify(signature, content, ec.ECDSA(hashes.SHA256()))
                return
            except InvalidSignature:
                continue
        raise SignatureError("no matching signature")
