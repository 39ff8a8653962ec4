"""Signatures that ride inside the body (Mailgun) or over a form's fields and the URL (Mandrill).

Mailgun signs ``signature.timestamp`` + ``signature.token`` (hex HMAC-SHA256
with the webhook signing key), both inside the JSON body, and nothing else:
the event data is not covered, so a captured signature could be replayed
with another body within the timestamp window. The tolerance is that
window; keep it short. Mandrill signs the webhook's URL followed by each
POST field's name and value in name order (base64 HMAC-SHA1), like Twilio
without Twilio's value ordering and port variants.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass

from inboxd_edge.bodies import form_fields
from inboxd_edge.signatures import SignatureError, check_timestamp, header_value

MANDRILL_HEADER = "X-Mandrill-Signature"


@dataclass(frozen=True)
class MailgunVerifier:
    """Mailgun's signature object in the body: timestamp, token, signature."""

    secrets: tuple[bytes, ...]
    tolerance: float

    @property
    def signed_headers(self) -> frozenset[str]:
        return frozenset()

    @property
    def input_headers(self) -> tuple[str, ...]:
        # Everything it reads is in the body, which is stored as it came.
        return ()

    @property
    def signs_url(self) -> bool:
        return False

    def verify(self, body: bytes, headers: Mapping[str, str], now: float, url: str = "", method: str = "POST") -> None:
        try:
            signature = json.loads(body).get("signature")
        except (ValueError, AttributeError):
            raise SignatureError("missing signature") from None
        if not isinstance(signature, dict) or not all(
            isinstance(signature.get(k), str | int) for k in ("timestamp", "token", "signature")
        ):
            raise SignatureError("missing signature")
        stamp = check_timestamp(str(signature["timestamp"]), now, self.tolerance)
        content = (stamp + str(signature["token"])).encode()
        offered = str(signature["signature"])
        for secret in self.secrets:
            if hmac.compare_digest(hmac.new(secret, content, hashlib.sha256).hexdigest(), offered):
                return
        raise SignatureError("no matching signature")


@dataclass(frozen=True)
class MandrillVerifier:
    """Mandrill's X-Mandrill-Signature over the webhook URL and the sorted form fields."""

    secrets: tuple[bytes, ...]

    @property
    def signed_headers(self) -> frozenset[str]:
        return frozenset()

    @property
    def input_headers(self) -> tuple[str, ...]:
        return (MANDRILL_HEADER.lower(),)

    @property
    def signs_url(self) -> bool:
        return True

    def verify(self, body: bytes, headers: Mapping[str, str], now: float, url: str = "", method: str = "POST") -> None:
        offered = header_value(headers, MANDRILL_HEADER)
        if not offered:
            raise SignatureError("missing signature")
        try:
            fields = dict(form_fields(body))
        except ValueError:
            raise SignatureError("body is not a UTF-8 form") from None
        content = (url + "".join(name + fields[name] for name in sorted(fields))).encode()
        for secret in self.secrets:
            expected = base64.b64encode(hmac.new(secret, content, hashlib.sha1).digest()).decode()
            if hmac.compare_digest(expected, offered.strip()):
                return
        raise SignatureError("no matching signature")
