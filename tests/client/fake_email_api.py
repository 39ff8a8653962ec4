"""A fake of the email API the example worker talks to, on 127.0.0.1 port 0, in a thread.

It honours Idempotency-Key (a repeated key answers the first send's id and
sends nothing), answers lookups by key, and counts everything: the test then
checks that each recipient got exactly one email, under exactly one key.
`answer_delay` holds each first answer back for a random moment after the send
is recorded, so a worker killed in that window has sent without knowing it.
"""

from __future__ import annotations

import json
import random
import threading
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SEND_PATH = "/v1/messages"
LOOKUP_PREFIX = "/v1/messages/by-key/"


@dataclass(frozen=True)
class Sent:
    key: str
    to: str
    message_id: str


class FakeEmailApi:
    """The fake API's state and server; start() picks a free port."""

    def __init__(self, *, answer_delay: tuple[float, float] = (0.0, 0.0), seed: int = 0) -> None:
        self.answer_delay = answer_delay
        self.sent: dict[str, Sent] = {}
        self.posts = 0
        self.lookups = 0
        self.lookups_found = 0  # lookups of a key that had been sent: a worker had sent without hearing back
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> FakeEmailApi:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                api.handle_post(self)

            def do_GET(self) -> None:
                api.handle_get(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="fake-email-api", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def requests(self) -> int:
        with self._lock:
            return self.posts + self.lookups

    def sends_to(self) -> Counter[str]:
        with self._lock:
            return Counter(s.to for s in self.sent.values())

    def keys_by_recipient(self) -> dict[str, set[str]]:
        with self._lock:
            keys: dict[str, set[str]] = {}
            for s in self.sent.values():
                keys.setdefault(s.to, set()).add(s.key)
            return keys

    def handle_post(self, request: BaseHTTPRequestHandler) -> None:
        key = request.headers.get("Idempotency-Key", "")
        length = int(request.headers.get("Content-Length", "0"))
        body = json.loads(request.rfile.read(length))
        if request.path != SEND_PATH or not key:
            self._answer(request, 400, {"error": "POST /v1/messages with an Idempotency-Key"})
            return
        with self._lock:
            self.posts += 1
            first = key not in self.sent
            if first:
                self.sent[key] = Sent(key, body["to"], f"msg_{len(self.sent) + 1}")
            sent = self.sent[key]
            delay = self._rng.uniform(*self.answer_delay) if first else 0.0
        if delay:
            threading.Event().wait(delay)
        self._answer(request, 200, {"id": sent.message_id})

    def handle_get(self, request: BaseHTTPRequestHandler) -> None:
        if not request.path.startswith(LOOKUP_PREFIX):
            self._answer(request, 404, {"error": "no such path"})
            return
        key = request.path.removeprefix(LOOKUP_PREFIX)
        with self._lock:
            self.lookups += 1
            sent = self.sent.get(key)
            self.lookups_found += sent is not None
        if sent is None:
            self._answer(request, 404, {"status": "not_found"})
        else:
            self._answer(request, 200, {"id": sent.message_id, "status": "sent"})

    @staticmethod
    def _answer(request: BaseHTTPRequestHandler, status: int, body: dict[str, str]) -> None:
        """Writes the answer, unless the client has gone away (killed, say)."""
        data = json.dumps(body).encode()
        try:
            request.send_response(status)
            request.send_header("Content-Type", "application/json")
            request.send_header("Content-Length", str(len(data)))
            request.end_headers()
            request.wfile.write(data)
            request.wfile.flush()
        except OSError:
            pass
