"""Loads the named SQL queries from `queries/*.sql`.

Each query stands under a `-- name: query_name` header, followed by comment
lines saying what it is for. Keeping SQL in .sql files lets it be read,
reviewed and EXPLAINed as SQL.

The comment lines stay in the files, for readers; what is sent is the
statement under one line naming it (`-- inboxd: event_claim`, which is
what pg_stat_activity and pg_stat_statements show). psycopg caches its
parse of a statement's placeholders only up to 4 KiB of text: the claim
statement with its comments (8 KiB) was parsed again on every call.

Two statements that differ only in their head and tail (the claim of one
named namespace and the claim's whole turn) share their middle as a part:
`-- part: part_name` stands over text that is not sent alone, and a line
`-- use: part_name` in a query of the same file stands for that text.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from importlib import resources
from typing import Any, LiteralString

import psycopg
from psycopg.rows import TupleRow

_HEADER = re.compile(r"^-- (name|part): (\w+)\s*$", re.MULTILINE)
_USE = re.compile(r"^-- use: (\w+)\s*$", re.MULTILINE)


def named_sections(text: str, where: str = "a queries file") -> dict[str, str]:
    """The queries of one file by name, as written (comments kept), each `-- use:` line replaced by its part."""
    pieces = _HEADER.split(text)
    # pieces: [preamble, kind1, name1, body1, kind2, name2, body2, ...]
    parts: dict[str, str] = {}
    queries: dict[str, str] = {}
    for kind, name, body in zip(pieces[1::3], pieces[2::3], pieces[3::3], strict=True):
        (parts if kind == "part" else queries)[name] = body.strip("\n")

    def use(match: re.Match[str]) -> str:
        if match.group(1) not in parts:
            raise RuntimeError(f"{where} uses the part {match.group(1)!r}, which it does not define")
        return parts[match.group(1)]

    return {name: _USE.sub(use, body) for name, body in queries.items()}


def _load() -> dict[str, LiteralString]:
    found: dict[str, LiteralString] = {}
    folder = resources.files("inboxd.store").joinpath("queries")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql"):
            continue
        for name, body in named_sections(entry.read_text(encoding="utf-8"), entry.name).items():
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
