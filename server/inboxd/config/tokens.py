"""Bearer tokens: who a caller is, which scopes and namespaces it was granted.

The tokens file holds only SHA-256 hashes of the tokens. Tokens are random
and long (see `new_token`), so a fast hash is enough: there is nothing to
brute-force. Every lookup compares against every entry in constant time,
so timing does not reveal which entries exist.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import hmac
import json
import logging
import re
import secrets
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from inboxd.config.file_modes import others_may_rewrite
from inboxd.domain.errors import PermissionDenied, Unauthenticated
from inboxd.domain.namespace_patterns import grant_to_like, like_matcher

log = logging.getLogger(__name__)

TOKEN_PREFIX = "ibx_"


class Scope(enum.StrEnum):
    ACCEPT = "accept"  # edges: Accept, AcceptBatch
    WORK = "work"  # workers: Claim and the fenced calls
    ADMIN = "admin"  # operators: InboxAdminService


class TokensFileError(ValueError):
    """The tokens file cannot be used; the message says which entry and why."""


@dataclass(frozen=True, slots=True)
class Caller:
    name: str
    scopes: frozenset[Scope]
    # Patterns such as "mailera/*"; "*" alone grants every namespace.
    namespaces: tuple[str, ...]
    # The SHA-256 of the token this caller presented (empty: no tokens file): what a reload judges a
    # live stream's caller by, since the token itself is kept nowhere.
    token_sha256: bytes = field(default=b"", compare=False, repr=False)

    @property
    def all_namespaces(self) -> bool:
        return "*" in self.namespaces

    def require_scope(self, scope: Scope) -> None:
        if scope not in self.scopes:
            raise PermissionDenied(f"token {self.name!r} lacks the {scope.value!r} scope")

    def may_see(self, namespace: str) -> bool:
        return self.all_namespaces or like_matcher(self.like_patterns()).matches(namespace)

    def require_namespace(self, namespace: str, field: str = "namespace") -> None:
        if not self.may_see(namespace):
            raise PermissionDenied(f"token {self.name!r} is not granted {field} {namespace!r}")

    def like_patterns(self) -> tuple[str, ...]:
        """The namespace patterns as SQL LIKE patterns (for a Claim that names no namespace)."""
        return _as_like(self.namespaces)


@functools.lru_cache(maxsize=4096)
def _as_like(grants: tuple[str, ...]) -> tuple[str, ...]:
    """Translated once per token's grants: every fenced call of a batch checks its item's namespace."""
    return tuple(grant_to_like(p) for p in grants)


ANONYMOUS = Caller("anonymous", frozenset(Scope), ("*",))


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


@dataclass(frozen=True, slots=True)
class _Entry:
    digest: bytes
    caller: Caller
    # Past it the token is UNAUTHENTICATED; None: it never expires.
    expires_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """What `inboxd token list` and the expiry gauges show of a token: never its secret nor its digest."""

    name: str
    scopes: frozenset[Scope]
    namespaces: tuple[str, ...]
    expires_at: datetime | None


class TokenRegistry:
    """The entries of one tokens file; `reload` swaps them atomically (SIGHUP)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: tuple[_Entry, ...] = self._load()
        # Told after each reload that took: open streams judge their callers again (api/live_streams.py).
        self._on_reload: list[Callable[[TokenRegistry], None]] = []

    def reload(self) -> int:
        """Re-reads the file; on error keeps the entries in force and raises."""
        self._entries = self._load()
        for listener in list(self._on_reload):
            listener(self)
        return len(self._entries)

    def on_reload(self, listener: Callable[[TokenRegistry], None]) -> None:
        """`listener(self)` runs after every reload that replaced the entries."""
        self._on_reload.append(listener)

    def current(self, caller: Caller) -> Caller | None:
        """The entry now in force for the token `caller` presented, or None: that token was revoked."""
        for entry in self._entries:
            if entry.digest == caller.token_sha256:
                return entry.caller
        return None

    def _load(self) -> tuple[_Entry, ...]:
        entries = load_tokens_file(self.path)
        if not entries:
            # Allowed (every token revoked at once), but an empty file or a misspelt header looks the same.
            log.warning("tokens file %s holds no tokens: every call will be refused UNAUTHENTICATED", self.path)
        return entries

    def tokens(self) -> list[TokenInfo]:
        """The tokens in force, as `inboxd token list` shows them (no secret, no digest)."""
        return [info(entry) for entry in self._entries]

    def authenticate(self, token: str | None, now: datetime | None = None) -> Caller:
        """The caller `token` names; UNAUTHENTICATED when it is missing, unknown, or past its expires_at."""
        if not token:
            raise Unauthenticated("missing bearer token: send metadata 'authorization: Bearer <token>'")
        presented = bytes.fromhex(hash_token(token))
        found: _Entry | None = None
        for entry in self._entries:  # no early exit: every entry costs the same
            if hmac.compare_digest(entry.digest, presented):
                found = entry
        if found is None:
            raise Unauthenticated("unknown bearer token")
        if found.expires_at is not None and (now or datetime.now(UTC)) >= found.expires_at:
            raise Unauthenticated(
                f"token {found.caller.name!r} expired at {found.expires_at.isoformat()}: ask for a new one"
            )
        return found.caller


def info(entry: _Entry) -> TokenInfo:
    return TokenInfo(entry.caller.name, entry.caller.scopes, entry.caller.namespaces, entry.expires_at)


# What an entry may say; anything else is a typo that would otherwise be ignored in silence.
_ENTRY_KEYS = ("name", "sha256", "scopes", "namespaces", "expires_at")


def load_tokens_file(path: Path) -> tuple[_Entry, ...]:
    """The entries of a tokens file; raises TokensFileError, naming the file and the entry, for anything else."""
    data = _read_toml(path)
    for key in data:
        if key != "token":
            raise TokensFileError(f"tokens file {path}: unknown key {key!r}: each entry goes under [[token]]")
    raw_entries = data.get("token", [])
    if not isinstance(raw_entries, list) or not all(isinstance(raw, dict) for raw in raw_entries):
        raise TokensFileError(f"tokens file {path}: 'token' must be entries, each under its own [[token]] header")
    entries: list[_Entry] = []
    names: set[str] = set()
    owners: dict[bytes, str] = {}
    for index, raw in enumerate(raw_entries):
        where = f"{path}: [[token]] #{index + 1}"
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            raise TokensFileError(f"{where}: 'name' is required")
        where = f"{where} ({name})"
        if name in names:
            raise TokensFileError(f"{where}: the name {name!r} is used twice")
        names.add(name)
        unknown = sorted(set(raw) - set(_ENTRY_KEYS))
        if unknown:
            raise TokensFileError(f"{where}: unknown key {unknown[0]!r}; an entry has {', '.join(_ENTRY_KEYS)}")
        digest = raw.get("sha256", "")
        if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise TokensFileError(f"{where}: 'sha256' must be 64 lowercase hex digits")
        hashed = bytes.fromhex(digest)
        if hashed in owners:
            # One token, two sets of grants: which one applies must not depend on the order of the file.
            raise TokensFileError(f"{where}: its sha256 is also entry {owners[hashed]!r}'s: one token, one entry")
        owners[hashed] = name
        entries.append(_Entry(hashed, _caller(where, raw, hashed), _expiry(where, raw.get("expires_at"))))
    return tuple(entries)


def _read_toml(path: Path) -> dict[str, object]:
    unsafe = others_may_rewrite(path)
    if unsafe is not None:
        raise TokensFileError(f"tokens file refused: {unsafe}")
    try:
        return tomllib.loads(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise TokensFileError(f"cannot read tokens file {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise TokensFileError(f"tokens file {path} is not UTF-8 (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise TokensFileError(f"tokens file {path} is not valid TOML: {exc}") from None


def _expiry(where: str, raw: object) -> datetime | None:
    """An entry's expires_at: a TOML offset date-time or an RFC 3339 string, with its offset; None when absent."""
    if raw is None:
        return None
    when = raw
    if isinstance(raw, str):
        try:
            when = datetime.fromisoformat(raw)
        except ValueError:
            when = None
    if not isinstance(when, datetime) or when.tzinfo is None:
        raise TokensFileError(
            f"{where}: 'expires_at' must be an RFC 3339 time with its offset, e.g. 2027-01-31T00:00:00Z"
        )
    return when.astimezone(UTC)


def _caller(where: str, raw: dict[str, object], digest: bytes) -> Caller:
    scopes_raw = raw.get("scopes", [])
    namespaces = raw.get("namespaces", [])
    if not isinstance(scopes_raw, list) or not scopes_raw:
        raise TokensFileError(f"{where}: 'scopes' must list accept, work and/or admin")
    try:
        scopes = frozenset(Scope(str(s)) for s in scopes_raw)
    except ValueError:
        raise TokensFileError(f"{where}: unknown scope in {scopes_raw!r}") from None
    if not isinstance(namespaces, list) or not namespaces or not all(isinstance(n, str) and n for n in namespaces):
        raise TokensFileError(f'{where}: \'namespaces\' must list patterns such as "mailera/*" or "*"')
    return Caller(str(raw["name"]), scopes, tuple(str(n) for n in namespaces), digest)


def entry_toml(
    name: str, token: str, scopes: Iterable[Scope], namespaces: Iterable[str], expires_at: datetime | None = None
) -> str:
    """The tokens-file entry for a new token (which itself is never stored)."""
    # JSON strings are valid TOML basic strings, escapes included.
    scope_list = ", ".join(json.dumps(s.value) for s in scopes)
    namespace_list = ", ".join(json.dumps(n) for n in namespaces)
    expiry = f"expires_at = {expires_at.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}\n" if expires_at else ""
    return (
        f"[[token]]\nname = {json.dumps(name)}\nsha256 = {json.dumps(hash_token(token))}\n"
        f"scopes = [{scope_list}]\nnamespaces = [{namespace_list}]\n{expiry}"
    )
