"""Who is calling: set per RPC by the auth interceptor, read where it matters.

Replay's audit row records the caller's name; a Claim that names no
namespace is limited to the caller's namespace patterns.
"""

from __future__ import annotations

from contextvars import ContextVar

from inboxd.config.tokens import ANONYMOUS, Caller

_caller: ContextVar[Caller] = ContextVar("inboxd_caller", default=ANONYMOUS)


def current_caller() -> Caller:
    return _caller.get()


def current_caller_name() -> str:
    """The tokens-file entry's name; "anonymous" when inboxd runs without a tokens file."""
    return _caller.get().name


def set_caller(caller: Caller) -> None:
    _caller.set(caller)
