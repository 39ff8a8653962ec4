"""What the edge benchmark sends and how it reads the answers: signed GitHub deliveries as raw HTTP/1.1 bytes.

Every request is built and signed before the generator connects, so the
measured window spends nothing on JSON or HMAC: it writes bytes and counts
answers. Each delivery is its own event (a body of its own, so a key of its
own: the `github` preset keys on the body's SHA-256), exactly BODY_BYTES of
JSON, signed as GitHub signs (`X-Hub-Signature-256: sha256=<hex HMAC-SHA256
of the body>`). The bare app and the edge get the same bytes.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass

BODY_BYTES = 1024
EVENT = "push"
# The route the benchmark's edge serves (bench/edge_procs.py writes it) and the bare app answers alike.
PATH = "/hooks/github/push"

_HEAD_END = b"\r\n\r\n"
_CONTENT_LENGTH = b"\r\ncontent-length:"


def _template(prefix: str) -> str:
    """A push event with %s holes for the commit and the delivery's id, padded so that filled it is BODY_BYTES."""

    def text(padding: str) -> str:
        event = {
            "ref": "refs/heads/main",
            "after": "%s",
            "delivery": "%s",
            "repository": {"id": 1296269, "full_name": "acme/app", "private": True},
            "pusher": {"name": "octocat", "email": "octocat@example.com"},
            "sender": {"login": "octocat", "id": 583231, "type": "User"},
            "padding": padding,
        }
        return json.dumps(event, separators=(",", ":"))

    # Every hole's filling has one width: 40 hex digits, and the prefix with a 9-digit number.
    filled = len((text("") % ("0" * 40, _delivery_id(prefix, 0))).encode())
    if filled > BODY_BYTES or "%" in prefix:
        raise ValueError(f"a delivery of prefix {prefix!r} is {filled} bytes before padding, over {BODY_BYTES}")
    return text("x" * (BODY_BYTES - filled))


def _delivery_id(prefix: str, i: int) -> str:
    return f"{prefix}-{i:09d}"


def delivery_body(prefix: str, i: int, template: str | None = None) -> bytes:
    """Delivery `i`'s JSON body, a push event of exactly BODY_BYTES bytes; no two `(prefix, i)` alike."""
    after = hashlib.sha1(_delivery_id(prefix, i).encode()).hexdigest()
    body = ((template or _template(prefix)) % (after, _delivery_id(prefix, i))).encode()
    if len(body) != BODY_BYTES:
        raise ValueError(f"delivery {_delivery_id(prefix, i)} is {len(body)} bytes, not {BODY_BYTES}")
    return body


def github_signature(body: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def request_bytes(host: str, body: bytes, secret: str, delivery_id: str, path: str = PATH) -> bytes:
    """One POST as GitHub sends it (its headers, its signature), keep-alive, ready for the socket."""
    head = (
        f"POST {path} HTTP/1.1\r\n"
        f"Host: {host}\r\n"
        "User-Agent: GitHub-Hookshot/bench\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        f"X-GitHub-Event: {EVENT}\r\n"
        f"X-GitHub-Delivery: {delivery_id}\r\n"
        f"X-Hub-Signature-256: {github_signature(body, secret)}\r\n"
        "\r\n"
    )
    return head.encode() + body


def signed_requests(host: str, secret: str, prefix: str, count: int) -> list[bytes]:
    """`count` distinct signed deliveries, each a whole request."""
    template = _template(prefix)
    return [
        request_bytes(host, delivery_body(prefix, i, template), secret, _delivery_id(prefix, i)) for i in range(count)
    ]


class ResponseError(RuntimeError):
    """An answer the generator cannot frame (no Content-Length, or not HTTP/1.x)."""


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes
    # Bytes of the buffer this answer took; the rest belongs to the next one.
    size: int


def split_response(buffer: bytes | bytearray) -> Response | None:
    """The first whole answer at the start of `buffer`, or None while it is incomplete.

    The edge and the bare app (both aiohttp) frame every answer with Content-Length; anything else is
    refused rather than guessed at, as it would desynchronise the connection.
    """
    end = buffer.find(_HEAD_END)
    if end < 0:
        return None
    head = bytes(buffer[:end]).lower()
    if not head.startswith(b"http/1."):
        raise ResponseError(f"not an HTTP/1.x answer: {bytes(buffer[:40])!r}")
    status = int(head[9:12])
    found = head.find(_CONTENT_LENGTH)
    if found < 0:
        raise ResponseError(f"an answer without Content-Length (status {status}): {bytes(buffer[:200])!r}")
    stop = head.find(b"\r\n", found + 2)
    length = int(head[found + len(_CONTENT_LENGTH) : stop if stop >= 0 else len(head)])
    size = end + len(_HEAD_END) + length
    if len(buffer) < size:
        return None
    return Response(status, bytes(buffer[end + len(_HEAD_END) : size]), size)


def percentile_ms(sorted_seconds: list[float], q: float) -> float:
    """The q-quantile (0..1, nearest rank) of already sorted latencies in seconds, in ms; 0 for none."""
    if not sorted_seconds:
        return 0.0
    index = min(len(sorted_seconds) - 1, max(0, round(q * len(sorted_seconds)) - 1))
    return 1000.0 * sorted_seconds[index]
