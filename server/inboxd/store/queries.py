"""Loads the named SQL queries from `queries/*.sql`.

Each query stands under a `-- name: query_name` header, followed by comment
lines saying what it is for. Keeping SQL in .sql files lets it be read,
reviewed and EXPLAINed as SQL.

The comment lines stay in the files, for readers; what is sent is the
statement under one line naming it (`-- inboxd: event_claim`, which is
what pg_stat_activity and pg_stat_statements show). psycopg caches its
parse of a statement's placeholders only up to 4 KiB of text: the claim
statement with its comments (8 KiB) was parsed again on every call.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from importlib import resources
from typing import Any, LiteralString

import psycopg
from psycopg.rows import TupleRow

_HEADER = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


def _load() -> dict[str, LiteralString]:
    found: dict[str, LiteralString] = {}
    folder = resources.files("inboxd.store").joinpath("queries")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql"):
            continue
        text = entry.read_text(encoding="utf-8")
        parts = _HEADER.split(text)
        # parts: [preamble, name1, body1, name2, body2, ...]
        for name, body in zip(parts[1::2], parts[2::2], strict=True):
            if name in found:
                raise RuntimeError(f"query {name!r} is defined twice (again in {entry.name})")
            # mypy takes LiteralString for str; the text is the package's own, never a caller's.
            found[name] = f"-- inboxd: {name}\n{_without_comment_lines(body)}"
    return found


def _without_comment_lines(body: str) -> str:
    """The statement without the lines that hold only a comment (no statement puts `--` inside a line)."""
    return "\n".join(line for line in body.strip().splitlines() if not line.lstrip().startswith("--"))


QUERIES = _load()

# psycopg parses a statement's %(name)s placeholders on every execute unless
# the text is at most this long; past it, a raw cursor's $n placeholders
# (parsed here once) spare the claim statement's calls that parse.
_PSYCOPG_CACHED_TEXT = 4096
# %(name)b (a parameter psycopg sends in binary) is numbered too; on the raw
# cursor it then goes in psycopg's default format for its type.
_PLACEHOLDER = re.compile(r"%\((\w+)\)[sb]|%%")


@functools.cache
def numbered(name: str) -> tuple[LiteralString, tuple[str, ...]]:
    """QUERIES[name] with $n placeholders, and the parameter name of each n."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(0) == "%%":
            return "%"
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    return _PLACEHOLDER.sub(number, QUERIES[name]), tuple(names)


async def execute(
    conn: psycopg.AsyncConnection[TupleRow], name: str, params: Mapping[str, Any], *, binary: bool = False
) -> psycopg.AsyncCursor[TupleRow] | psycopg.AsyncRawCursor[TupleRow]:
    """Runs the named query with `params` (by name): psycopg's own way, or, for a long one, numbered.

    `binary`: the rows come back in binary format (no text to parse for a timestamp, say).
    """
    if len(QUERIES[name]) <= _PSYCOPG_CACHED_TEXT:
        return await conn.execute(QUERIES[name], params, binary=binary)
    text, names = numbered(name)
    cur = psycopg.AsyncRawCursor(conn)
    await cur.execute(text, [params[n] for n in names], binary=binary)
    return cur
