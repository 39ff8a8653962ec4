"""Twilio's X-Twilio-Signature: HMAC-SHA1 over the public URL it called and the sorted form fields, base64.

Twilio signs the URL it was given for the webhook, not the one the edge
sees behind a proxy or a load balancer, so a route names that URL
(``public_url``); the request's query string, which Twilio signs as part of
the URL, is appended as it arrived. A form body is signed through its fields:
each name in code-point order, followed by its values in that order, each
distinct pair once (as Twilio's own ``RequestValidator`` does). A JSON body is
signed through the URL instead: its ``bodySHA256`` query parameter is the
body's hex SHA-256. Twilio has no timestamp, so nothing bounds a replay in
time: a replayed delivery names the same event (its ``MessageSid``) and is a
duplicate.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import parse_qs, urlparse

from inboxd_edge.bodies import form_fields, is_form
from inboxd_edge.signatures import SignatureError, header_value

HEADER = "X-Twilio-Signature"


@dataclass(frozen=True)
class TwilioVerifier:
    """Verifies X-Twilio-Signature with any of the account's auth tokens (a secondary one while rotating)."""

    secrets: tuple[bytes, ...]

    @property
    def signed_headers(self) -> frozenset[str]:
        # Only the URL and the form's fields are signed: no header beside the signature.
        return frozenset()

    @property
    def input_headers(self) -> tuple[str, ...]:
        return (HEADER.lower(),)

    @property
    def signs_url(self) -> bool:
        return True

    def verify(self, body: bytes, headers: Mapping[str, str], now: float, url: str = "", method: str = "POST") -> None:
        offered = header_value(headers, HEADER)
        if not offered:
            raise SignatureError("missing signature")
        if not url:
            raise SignatureError("no public url to verify against")
        fields = _signed_fields(body, header_value(headers, "Content-Type") or "", url)
        for candidate in _port_variants(url):
            content = (candidate + fields).encode()
            for secret in self.secrets:
                expected = base64.b64encode(hmac.new(secret, content, hashlib.sha1).digest()).decode()
                if hmac.compare_digest(expected, offered.strip()):
                    return
        raise SignatureError("no matching signature")


def _signed_fields(body: bytes, content_type: str, url: str) -> str:
    """The form's part of the signed text ("" when the URL signs the body by its SHA-256)."""
    stated = parse_qs(urlparse(url).query).get("bodySHA256")
    if stated:
        if not hmac.compare_digest(hashlib.sha256(body).hexdigest(), stated[0]):
            raise SignatureError("body does not match bodySHA256")
        return ""
    if not is_form(content_type):
        raise SignatureError("body is neither a form nor signed by a bodySHA256 in the url")
    try:
        pairs = form_fields(body)
    except ValueError:
        raise SignatureError("body is not a UTF-8 form") from None
    return signed_form_text(pairs)


def signed_form_text(pairs: Iterable[tuple[str, str]]) -> str:
    """Each field name in code-point order followed by its distinct values in that order, concatenated."""
    values: dict[str, set[str]] = {}
    for name, value in pairs:
        values.setdefault(name, set()).add(value)
    return "".join(name + value for name in sorted(values) for value in sorted(values[name]))


def _port_variants(url: str) -> tuple[str, str]:
    """The URL as named, and with its port toggled (dropped, or the scheme's default added): Twilio signs either."""
    parsed = urlparse(url)
    if parsed.port:
        return url, parsed._replace(netloc=parsed.netloc.rsplit(":", 1)[0]).geturl()
    default = 443 if parsed.scheme == "https" else 80
    return url, parsed._replace(netloc=f"{parsed.netloc}:{default}").geturl()


def check_public_url(template: str, path_params: set[str]) -> None:
    """Raises ValueError unless `template` is an absolute http(s) URL whose placeholders are the path's."""
    parsed = urlparse(template)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(f"public_url {template!r} must be the absolute http(s) URL the provider calls")
    if parsed.query or parsed.fragment:
        raise ValueError("public_url takes no query or fragment: the request's own query string is appended")
    used = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    if missing := used - path_params:
        raise ValueError(f"public_url uses {sorted(missing)}, which the path does not define")


def public_url(template: str, path_params: Mapping[str, str], raw_query: str) -> str:
    """The URL the provider called: the route's template with the path's values, then the query as it arrived."""
    url = template.format_map(dict(path_params))
    return f"{url}?{raw_query}" if raw_query else url
