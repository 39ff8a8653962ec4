"""Namespace patterns: a token's grants, their SQL LIKE form, and matching them in Python as PostgreSQL does.

A token grants namespaces by glob ("mailera/*", "*"). The store filters with
the same grants as SQL LIKE patterns, and the wake-up bus and the token checks
match names in Python: one translation each way, so a name a token may see is
the name its Claim's SQL takes.
"""

from __future__ import annotations

import functools
import re


def grant_to_like(pattern: str) -> str:
    """A token's glob grant ("*" for any run of characters) as an SQL LIKE pattern (backslash escapes)."""
    escaped = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%")


@functools.lru_cache(maxsize=4096)
def like_matcher(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """SQL LIKE patterns as one regular expression for fullmatch; it matches nothing when there are none.

    Compiled once per set of patterns: every fenced call of a batch checks its item's namespace.
    """
    if not patterns:
        return re.compile("(?!)")
    return re.compile("|".join(_like_to_regex(p) for p in patterns), re.DOTALL)


def _like_to_regex(pattern: str) -> str:
    parts: list[str] = []
    chars = iter(pattern)
    for char in chars:
        if char == "\\":
            parts.append(re.escape(next(chars, "\\")))
        elif char == "%":
            parts.append(".*")
        elif char == "_":
            parts.append(".")
        else:
            parts.append(re.escape(char))
    return "(?:" + "".join(parts) + ")"


def like_prefix(pattern: str) -> str:
    """The literal text an SQL LIKE pattern starts with: every name it matches begins with it.

    The store hands these to its queries so that PostgreSQL can scan an index range before it applies LIKE.
    """
    prefix: list[str] = []
    chars = iter(pattern)
    for char in chars:
        if char in "%_":
            break
        prefix.append(next(chars, "\\") if char == "\\" else char)
    return "".join(prefix)
