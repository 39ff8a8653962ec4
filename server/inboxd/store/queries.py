"""Loads the named SQL queries from `queries/*.sql`.

Each query stands under a `-- name: query_name` header, followed by comment
lines saying what it is for. Keeping SQL in .sql files lets it be read,
reviewed and EXPLAINed as SQL.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import LiteralString, cast

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
            found[name] = cast(LiteralString, body.strip())
    return found


QUERIES = _load()
