"""The console's sessions: a random id in the cookie, the rest in this process's memory.

The cookie holds no token, only a random session id: a browser that sends
it to another service on the same host (cookies ignore ports) gives away
nothing that works anywhere but this console, and only until the session
ends. A session ends at its absolute expiry, after its idle timeout, on
Sign out, and when the token that opened it leaves the tokens file (the
console re-authenticates that token at every request). Each session has a
secret of its own that keys its forms' CSRF token, so knowing or choosing
a cookie's value is not enough to compute it.

The table lives in memory, in the one process that serves the console
(under --workers N the parent; the children serve gRPC only): a restart
signs everyone out, and each replica has its own sessions.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from inboxd.config.tokens import Caller

# A session ends this long after sign-in, however busy (seconds).
MAX_AGE_SECONDS = 8 * 3600
# ...and this long after its last request, whichever comes first.
IDLE_SECONDS = 30 * 60
# Sessions kept at most: signing in once more drops the least recently used.
MAX_SESSIONS = 1000
_CSRF_CONTEXT = b"inboxd-console-csrf-v2"

# Seconds on any steady scale; tests pass their own and move it by hand.
Clock = Callable[[], float]


@dataclass
class Session:
    """One signed-in browser: who, with which token, since when, and the secret of its forms."""

    caller: Caller
    # The bearer token that signed in (None in open mode): re-checked at every request,
    # so a token revoked by SIGHUP ends its sessions. Never leaves this process.
    token: str | None
    csrf_secret: bytes
    started: float
    last_seen: float

    @property
    def csrf(self) -> str:
        return hmac.new(self.csrf_secret, _CSRF_CONTEXT, hashlib.sha256).hexdigest()

    def csrf_matches(self, presented: str | None) -> bool:
        return bool(presented) and hmac.compare_digest(self.csrf, presented or "")


def _key(session_id: str) -> bytes:
    # Looked up by digest: the table's keys are not the cookie values themselves.
    return hashlib.sha256(session_id.encode("utf-8")).digest()


class Sessions:
    """The table of live sessions; `clock` is time.monotonic unless a test moves time itself."""

    def __init__(
        self,
        clock: Clock = time.monotonic,
        *,
        max_age: float = MAX_AGE_SECONDS,
        idle: float = IDLE_SECONDS,
        capacity: int = MAX_SESSIONS,
    ) -> None:
        self.clock = clock
        self.max_age = max_age
        self.idle = idle
        self.capacity = capacity
        self._live: dict[bytes, Session] = {}

    def __len__(self) -> int:
        return len(self._live)

    def open(self, caller: Caller, token: str | None) -> tuple[str, Session]:
        """A new session for `caller`; returns the id for the cookie (kept here only as a digest)."""
        now = self.clock()
        self._drop_ended(now)
        while len(self._live) >= self.capacity:
            oldest = min(self._live, key=lambda k: self._live[k].last_seen)
            del self._live[oldest]
        session_id = secrets.token_urlsafe(32)
        session = Session(caller, token, secrets.token_bytes(32), started=now, last_seen=now)
        self._live[_key(session_id)] = session
        return session_id, session

    def find(self, session_id: str | None, *, touch: bool = True) -> Session | None:
        """The live session of this id, or None (unknown, expired or idle too long: then dropped).

        `touch` False: a request that does not count as the operator's activity
        (the overview's own refresh), so a tab left open still goes idle.
        """
        if not session_id:
            return None
        key = _key(session_id)
        session = self._live.get(key)
        if session is None:
            return None
        now = self.clock()
        if self._ended(session, now):
            del self._live[key]
            return None
        if touch:
            session.last_seen = now
        return session

    def close(self, session_id: str | None) -> None:
        """Sign out: the id is worthless from now on, in every browser that holds it."""
        if session_id:
            self._live.pop(_key(session_id), None)

    def _ended(self, session: Session, now: float) -> bool:
        return now - session.started >= self.max_age or now - session.last_seen >= self.idle

    def _drop_ended(self, now: float) -> None:
        for key in [k for k, s in self._live.items() if self._ended(s, now)]:
            del self._live[key]


# The app's lookup of a request's live session (raises Unauthenticated), handed to each page and form:
# they need no more of the app, so none of them imports it.
SessionOf = Callable[[web.Request], Session]
