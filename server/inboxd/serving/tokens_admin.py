"""The tokens file's lifecycle from the command line: create, list, revoke; and the expiry gauges it feeds.

The file stays the one source of truth, edited in place and read again on
SIGHUP: `revoke` removes one entry's lines and keeps every other line and
comment as written, through a fresh file renamed over the old one (the
running server never reads half a file).
"""

from __future__ import annotations

import argparse
import os
import re
import tomllib
from datetime import UTC, datetime
from pathlib import Path

from inboxd.config.settings import ConfigError, parse_duration
from inboxd.config.tokens import Scope, TokenRegistry, TokensFileError, entry_toml, load_tokens_file, new_token
from inboxd.observability.token_gauges import TokenExpiryGauges

_HEADER = re.compile(r"^\s*\[\[\s*token\s*\]\]", re.MULTILINE)


def token_expiry_gauges(registry: TokenRegistry | None) -> TokenExpiryGauges:
    """The gauges over the tokens in force; both read 0 without a tokens file (then nothing can expire)."""
    return TokenExpiryGauges(lambda: [token.expires_at for token in registry.tokens()] if registry else [])


def add_token_commands(token: argparse.ArgumentParser) -> None:
    commands = token.add_subparsers(dest="token_command", required=True)
    create = commands.add_parser("create", help="print a new token once, and its tokens-file entry")
    create.add_argument("--name", required=True, help="who holds it, e.g. edge-stripe")
    create.add_argument("--scopes", required=True, help="comma-separated: accept, work, admin")
    create.add_argument("--namespaces", required=True, help='comma-separated patterns, e.g. "stripe/*" or "*"')
    create.add_argument("--expires-in", help="a lifetime such as 90d or 12h: the entry gets its expires_at")
    shown = "show each token's name, scopes, namespaces and expiry (never a secret)"
    removed = "remove a token's entry from the tokens file; then send SIGHUP to inboxd"
    for name, what in (("list", shown), ("revoke", removed)):
        sub = commands.add_parser(name, help=what)
        sub.add_argument(
            "--tokens-file", default=os.environ.get("INBOXD_TOKENS_FILE"), help="default: INBOXD_TOKENS_FILE"
        )
        if name == "revoke":
            sub.add_argument("name", help="the entry's name")


def run_token_command(args: argparse.Namespace) -> None:
    if args.token_command == "create":
        _create(args)
        return
    if not args.tokens_file:
        raise ConfigError("name the tokens file: --tokens-file FILE, or INBOXD_TOKENS_FILE")
    path = Path(args.tokens_file)
    if args.token_command == "list":
        print(listing(path))
    else:
        revoke(path, args.name)
        print(f"token {args.name!r} removed from {path}: send SIGHUP to inboxd (systemctl reload inboxd) to apply it")


def _create(args: argparse.Namespace) -> None:
    try:
        scopes = [Scope(s.strip()) for s in args.scopes.split(",") if s.strip()]
    except ValueError:
        raise ConfigError(f"--scopes {args.scopes!r}: use accept, work and/or admin, comma-separated") from None
    namespaces = [n.strip() for n in args.namespaces.split(",") if n.strip()]
    if not scopes or not namespaces:
        raise ConfigError("--scopes and --namespaces each need at least one value")
    expires_at = None
    if args.expires_in:
        try:
            expires_at = datetime.now(UTC) + parse_duration("--expires-in", args.expires_in)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    token = new_token()
    print(f"token (shown once, store it now): {token}\n")
    print("add this entry to the tokens file, then send SIGHUP to inboxd (or restart it):\n")
    print(entry_toml(args.name, token, scopes, namespaces, expires_at))


def listing(path: Path, now: datetime | None = None) -> str:
    """A table of the file's tokens: NAME, SCOPES, NAMESPACES, EXPIRES (and how far off, or `expired`)."""
    now = now or datetime.now(UTC)
    registry = TokenRegistry(path)
    rows = [("NAME", "SCOPES", "NAMESPACES", "EXPIRES")]
    for token in sorted(registry.tokens(), key=lambda t: t.name):
        expiry = "never"
        if token.expires_at is not None:
            left = token.expires_at - now
            when = token.expires_at.strftime("%Y-%m-%dT%H:%M:%SZ")
            expiry = f"{when} (expired)" if left.total_seconds() <= 0 else f"{when} (in {left.days}d)"
        scopes = ",".join(sorted(s.value for s in token.scopes))
        rows.append((token.name, scopes, ",".join(token.namespaces), expiry))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def revoke(path: Path, name: str) -> None:
    """Removes the entry named `name`, every other line kept; raises TokensFileError when there is none."""
    text = path.read_text(encoding="utf-8")
    starts = [m.start() for m in _HEADER.finditer(text)]
    bounds = list(zip(starts, [*starts[1:], len(text)][: len(starts)], strict=True))
    names = []
    for begin, end in bounds:
        entry = tomllib.loads(text[begin:end]).get("token", [{}])[0]
        names.append(str(entry.get("name", "")))
    if name not in names:
        raise TokensFileError(f"{path} has no token named {name!r} (it has: {', '.join(names) or 'none'})")
    begin, end = bounds[names.index(name)]
    fresh = path.with_name(f".{path.name}.revoking")
    fresh.write_text(text[:begin] + text[end:], encoding="utf-8")
    os.chmod(fresh, path.stat().st_mode & 0o777)
    try:
        load_tokens_file(fresh)  # never leave a file the server would refuse on SIGHUP
    except TokensFileError:
        fresh.unlink()
        raise
    os.replace(fresh, path)
