"""Destinations: HTTP endpoints inboxd POSTs events to, signed as Standard Webhooks, and what an answer leads to.

A destination is a worker that lives inside inboxd: it claims the events of
the namespaces it serves through the ordinary claim path and POSTs each one.
This module holds the values and the rules, with no I/O: what a valid
destination is, how a delivery is signed (Standard Webhooks v1: HMAC-SHA256
of `{id}.{timestamp}.{body}` with the secret's bytes), which `webhook-id`
an event gets (the same on every attempt, so the endpoint can dedupe), what
an answer does to the event, and when the circuit breaker opens.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

from inboxd.domain.errors import InvalidArgument

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
SECRET_PREFIX = "whsec_"
DEFAULT_TIMEOUT = timedelta(seconds=10)
MIN_TIMEOUT = timedelta(seconds=1)
MAX_TIMEOUT = timedelta(minutes=5)
DEFAULT_CONCURRENCY = 8
MAX_CONCURRENCY = 100
MAX_URL = 2048
# How much of an answer's body an attempt keeps.
EXCERPT_BYTES = 1024
# A 429's Retry-After beyond this is taken as this: the event retries within the hour, as a backoff's cap would.
MAX_RETRY_AFTER = timedelta(hours=1)
# The breaker opens after this many failed POSTs in a row; it tries one event
# after BREAKER_FIRST_TRY, then after twice as long each time, up to BREAKER_LONGEST_TRY.
BREAKER_THRESHOLD = 5
BREAKER_FIRST_TRY = timedelta(seconds=5)
BREAKER_LONGEST_TRY = timedelta(minutes=10)
# Metadata the edge wrote from the provider's signature check (clients/edge README).
SIGNATURE_METADATA_PREFIX = "inboxd.signature."


class DestinationState(enum.Enum):
    ACTIVE = "active"
    # The breaker is open: nothing is claimed for it until next_try_at.
    PAUSED = "paused"


@dataclass(frozen=True, slots=True)
class DestinationSpec:
    """What an operator asks for: validated, with defaults filled in."""

    name: str
    url: str
    namespace_pattern: str
    secret: str
    timeout: timedelta = DEFAULT_TIMEOUT
    # 0: the server's INBOXD_MAX_ATTEMPTS.
    max_attempts: int = 0
    # Zero: the server's backoff.
    backoff_base: timedelta = timedelta(0)
    backoff_cap: timedelta = timedelta(0)
    forward_signature_metadata: bool = False
    concurrency: int = DEFAULT_CONCURRENCY


@dataclass(frozen=True, slots=True)
class Destination:
    spec: DestinationSpec
    state: DestinationState
    paused_reason: str
    next_try_at: datetime | None
    consecutive_failures: int
    created_at: datetime
    created_by: str

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def lease(self) -> timedelta:
        """A claim's lease: the POST's timeout and a margin as long (at least 5 s) to write the answer."""
        return self.spec.timeout + max(self.spec.timeout, timedelta(seconds=5))


@dataclass(frozen=True, slots=True)
class DeliveryAttempt:
    destination: str
    namespace: str
    event_key: str
    webhook_id: str
    attempt: int
    fencing_token: int
    attempted_at: datetime
    # 0: no answer came.
    status_code: int
    latency: timedelta
    error: str
    response_excerpt: bytes
    outcome: str


def _check_duration(field: str, value: timedelta, low: timedelta, high: timedelta) -> None:
    if not low <= value <= high:
        raise InvalidArgument(field, f"must be between {low.total_seconds():g} s and {high.total_seconds():g} s,"
                              f" got {value.total_seconds():g} s")  # fmt: skip


def check_url(url: str, *, allow_http: bool) -> None:
    """An absolute https URL (http too when allowed), with a host and without credentials in it."""
    if not url or len(url) > MAX_URL:
        raise InvalidArgument("url", f"must be 1..{MAX_URL} characters, got {len(url)}")
    parts = urlsplit(url)
    schemes = ("https", "http") if allow_http else ("https",)
    if parts.scheme not in schemes:
        hint = "" if allow_http else " (plain http only with INBOXD_DESTINATIONS_ALLOW_HTTP=true)"
        raise InvalidArgument("url", f"scheme {parts.scheme!r} is not allowed: use https{hint}")
    if not parts.hostname:
        raise InvalidArgument("url", f"{url!r} names no host")
    if parts.username or parts.password:
        raise InvalidArgument("url", "must not carry credentials: the signature authenticates inboxd")
    if parts.fragment:
        raise InvalidArgument("url", "must not carry a fragment")


def new_secret() -> str:
    """A fresh signing secret: `whsec_` and the base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def secret_key(secret: str) -> bytes:
    """The HMAC key a `whsec_...` secret stands for; InvalidArgument when it is not one."""
    if not secret.startswith(SECRET_PREFIX):
        raise InvalidArgument("secret", f"must begin with {SECRET_PREFIX!r} (Standard Webhooks)")
    try:
        key = base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
    except ValueError as exc:
        raise InvalidArgument("secret", f"is not base64 after {SECRET_PREFIX!r}") from exc
    if not 24 <= len(key) <= 64:
        raise InvalidArgument("secret", f"must hold 24..64 bytes, holds {len(key)}")
    return key


def checked_spec(spec: DestinationSpec, *, allow_http: bool) -> DestinationSpec:
    """The spec with every field checked; the secret generated when empty."""
    if not NAME.match(spec.name):
        raise InvalidArgument("name", f"{spec.name!r}: 1..100 letters, digits, '.', '_' or '-', from a letter or digit")
    check_url(spec.url, allow_http=allow_http)
    if not spec.namespace_pattern or len(spec.namespace_pattern.encode()) > 512 or "\x00" in spec.namespace_pattern:
        raise InvalidArgument("namespace_pattern", "must be a namespace or a glob of 1..512 bytes without NUL")
    secret = spec.secret or new_secret()
    secret_key(secret)
    _check_duration("timeout", spec.timeout, MIN_TIMEOUT, MAX_TIMEOUT)
    if spec.max_attempts < 0 or spec.max_attempts > 1000:
        raise InvalidArgument("max_attempts", f"must be 0..1000 (0: the server's), got {spec.max_attempts}")
    if spec.backoff_base < timedelta(0) or spec.backoff_cap < timedelta(0):
        raise InvalidArgument("backoff_base", "must not be negative")
    if spec.backoff_base and spec.backoff_cap and spec.backoff_cap < spec.backoff_base:
        raise InvalidArgument("backoff_cap", "must be at least backoff_base")
    if not 1 <= spec.concurrency <= MAX_CONCURRENCY:
        raise InvalidArgument("concurrency", f"must be 1..{MAX_CONCURRENCY}, got {spec.concurrency}")
    return DestinationSpec(
        spec.name, spec.url, spec.namespace_pattern, secret, spec.timeout, spec.max_attempts,
        spec.backoff_base, spec.backoff_cap or (MAX_RETRY_AFTER if spec.backoff_base else timedelta(0)),
        spec.forward_signature_metadata, spec.concurrency,
    )  # fmt: skip


def webhook_id(namespace: str, event_key: str) -> str:
    """The event's `webhook-id`: the same on every attempt and every replica, so the endpoint can dedupe."""
    digest = hashlib.sha256(namespace.encode() + b"\x00" + event_key.encode()).hexdigest()
    return f"msg_{digest[:32]}"


def signature(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` header: `v1,` and the base64 HMAC-SHA256 of `{id}.{timestamp}.{body}`."""
    mac = hmac.new(secret_key(secret), f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256)
    return "v1," + base64.b64encode(mac.digest()).decode()


def delivery_headers(
    spec: DestinationSpec,
    *,
    namespace: str,
    event_key: str,
    event_type: str,
    attempt: int,
    content_type: str,
    body: bytes,
    metadata: Mapping[str, str],
    now: datetime,
) -> dict[str, str]:
    """Every header of one POST: the Standard Webhooks three, the content type, and inboxd's own."""
    msg_id = webhook_id(namespace, event_key)
    timestamp = int(now.timestamp())
    headers = {
        "content-type": content_type,
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(spec.secret, msg_id, timestamp, body),
        "inboxd-namespace": namespace,
        "inboxd-event-key": event_key,
        "inboxd-event-type": event_type,
        "inboxd-attempt": str(attempt),
    }
    if spec.forward_signature_metadata:
        for key, value in metadata.items():
            if key.startswith(SIGNATURE_METADATA_PREFIX):
                headers["inboxd-signature-" + key[len(SIGNATURE_METADATA_PREFIX) :]] = value
    # Header values must be one line of visible text: an identity that is not would break the request.
    return {k: v for k, v in headers.items() if v.isprintable() and "\n" not in v and "\r" not in v}


class Verdict(enum.Enum):
    COMPLETE = "completed"
    RETRY = "retry"
    DEAD_LETTER = "dead-lettered"


# Client errors that say "not now" rather than "never" (Request Timeout, Conflict, Too Many Requests).
RETRYABLE_4XX = frozenset({408, 409, 429})


def verdict(status: int | None) -> Verdict:
    """What an answer does to the event: None (no answer: timeout, connection error, refused address) retries."""
    if status is None:
        return Verdict.RETRY
    if 200 <= status < 300:
        return Verdict.COMPLETE
    if 400 <= status < 500 and status not in RETRYABLE_4XX:
        return Verdict.DEAD_LETTER
    # 5xx, 408, 409, 429, and a redirect (never followed: the URL is the operator's to fix).
    return Verdict.RETRY


def endpoint_failed(status: int | None) -> bool:
    """Whether an answer counts toward the breaker: the endpoint is down or refusing, not judging one event."""
    return verdict(status) is Verdict.RETRY


def retry_after(value: str | None, now: datetime) -> timedelta | None:
    """A Retry-After header (seconds, or an HTTP date) as a delay, capped at MAX_RETRY_AFTER; None when unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        delay = timedelta(seconds=int(value))
    else:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        delay = max(when - now, timedelta(0))
    return min(delay, MAX_RETRY_AFTER)


def breaker_reason(failures: int, last_error: str) -> str:
    """Why a breaker opened, in words."""
    return f"{failures} failed deliveries in a row; the last: {last_error[:500]}"
