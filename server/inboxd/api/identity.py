"""Who is calling: set per RPC by the auth layer, read by whoever must record it (Replay's audit)."""

from __future__ import annotations

from contextvars import ContextVar

# The name of the tokens-file entry that authenticated the call; "anonymous"
# when inboxd runs without a tokens file (loopback only).
_caller: ContextVar[str] = ContextVar("inboxd_caller", default="anonymous")


def current_caller_name() -> str:
    return _caller.get()


def set_caller_name(name: str) -> None:
    _caller.set(name)
