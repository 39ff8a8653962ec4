"""Namespace patterns: a token's grants, their SQL LIKE form, and matching them in Python as PostgreSQL does.

A token grants namespaces by glob ("mailera/*", "*"). The store filters with
the same grants as SQL LIKE patterns, and the wake-up bus and the token checks
match names in Python: one translation each way, so a name a token may see is
the name its Claim's SQL takes.

Matching is linear in practice and O(name x pattern) at worst, never
exponential. Patterns with at most one `%` (most grants) are one regular
expression, whose single `.*` tries each place once. Any other pattern is
split at its `%` into pieces of fixed length (literals and `_`), and each
piece is found at its leftmost place after the one before. Because every
piece has a fixed length, the leftmost place is always the best one, so no
choice is ever revisited. A regular expression with a `.*` per `%`
backtracks over every way to split the name between the stars:
`*/*/*/*/orders` against 331 slashes took seconds. PostgreSQL's own LIKE
needs no such care: it stops trying places for a `%` once the rest of the
name is too short (LIKE_ABORT in like_match.c); 4096 slashes against ten
`%` took it under 3 ms.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from inboxd.domain.errors import InvalidArgument


def grant_to_like(pattern: str) -> str:
    """A token's glob grant ("*" for any run of characters) as an SQL LIKE pattern (backslash escapes)."""
    escaped = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%")


@dataclass(frozen=True, slots=True)
class _Piece:
    """A run of a LIKE pattern between two `%`: literal characters and `_` (any one), so of fixed length."""

    length: int
    # The literal text when the piece holds no `_` (found with str.find); else a regex of literals and `.`.
    literal: str | None
    regex: re.Pattern[str] | None
    # As a regular expression: literals and `.`.
    source: str

    def at(self, name: str, start: int) -> bool:
        """Whether the piece matches `name` at `start` exactly."""
        if self.literal is not None:
            return name.startswith(self.literal, start)
        assert self.regex is not None
        return start + self.length <= len(name) and self.regex.match(name, start) is not None

    def find(self, name: str, start: int) -> int:
        """The leftmost place at or after `start` where the piece matches, or -1."""
        if self.literal is not None:
            return name.find(self.literal, start)
        assert self.regex is not None
        found = self.regex.search(name, start)
        return -1 if found is None else found.start()


def _piece(chars: Sequence[str | None]) -> _Piece:
    """`chars` holds a pattern's literal characters, None standing for `_`."""
    source = "".join("." if c is None else re.escape(c) for c in chars)
    if None not in chars:
        return _Piece(len(chars), "".join(c for c in chars if c is not None), None, source)
    # Literals and `.` only, no quantifier: a search costs at most length x name, never more.
    return _Piece(len(chars), None, re.compile(source, re.DOTALL), source)


@dataclass(frozen=True, slots=True)
class _Like:
    """One LIKE pattern: its pieces, and whether it starts and ends with `%`."""

    pieces: tuple[_Piece, ...]
    # Without a `%` the pattern is its one piece, matched exactly.
    has_percent: bool
    # The fewest characters a name it matches has: once, not per name (a sum over 246 pieces was most of
    # the time an Accept spent matching other tenants' many-star globs).
    least: int

    def matches(self, name: str) -> bool:
        if not self.has_percent:
            (only,) = self.pieces
            return len(name) == only.length and only.at(name, 0)
        first, last = self.pieces[0], self.pieces[-1]
        end = len(name) - last.length
        # Both ends first, each one comparison: the pieces between are searched for only then.
        if self.least > len(name) or not first.at(name, 0) or not last.at(name, end):
            return False
        position = first.length
        for piece in self.pieces[1:-1]:
            found = piece.find(name, position)
            if found < 0 or found + piece.length > end:
                return False
            position = found + piece.length
        return True


def _parse_like(pattern: str) -> _Like:
    pieces: list[_Piece] = []
    current: list[str | None] = []
    chars = iter(pattern)
    for char in chars:
        if char == "%":
            pieces.append(_piece(current))
            current = []
        elif char == "_":
            current.append(None)
        else:
            current.append(next(chars, "\\") if char == "\\" else char)
    pieces.append(_piece(current))
    return _Like(tuple(pieces), len(pieces) > 1, sum(p.length for p in pieces))


@dataclass(frozen=True, slots=True)
class LikeMatcher:
    """SQL LIKE patterns matched against whole names, as PostgreSQL's LIKE matches them (case-sensitive)."""

    # The patterns with at most one `%` ("mailera/*", "*", most grants) as one regular expression:
    # with a single `.*` a fullmatch tries each split once, O(name x pattern), at C speed.
    simple: re.Pattern[str] | None
    # The others, matched piece by piece.
    starred: tuple[_Like, ...]
    # The others' ends alone (first piece, `.*`, last piece), as one regular expression: a name none of
    # them starts and ends as is refused in one C call, not one Python call per pattern (a wake-up
    # meets every waiting Claim's patterns that its prefix allows).
    ends: re.Pattern[str] | None = None

    def matches(self, name: str) -> bool:
        """Whether any of the patterns matches all of `name`; never, when there are none."""
        if self.simple is not None and self.simple.fullmatch(name) is not None:
            return True
        if self.ends is None or self.ends.fullmatch(name) is None:
            return False
        for pattern in self.starred:
            if pattern.matches(name):
                return True
        return False


@functools.lru_cache(maxsize=4096)
def like_matcher(patterns: tuple[str, ...]) -> LikeMatcher:
    """SQL LIKE patterns as one matcher; it matches nothing when there are none.

    Built once per set of patterns: every fenced call of a batch checks its item's namespace.
    """
    parsed = [_parse_like(p) for p in patterns]
    simple = [".*".join(piece.source for piece in like.pieces) for like in parsed if len(like.pieces) <= 2]
    starred = tuple(like for like in parsed if len(like.pieces) > 2)
    ends = [f"{like.pieces[0].source}.*{like.pieces[-1].source}" for like in starred]
    return LikeMatcher(
        re.compile("|".join(f"(?:{source})" for source in simple), re.DOTALL) if simple else None,
        starred,
        re.compile("|".join(f"(?:{source})" for source in ends), re.DOTALL) if ends else None,
    )


@functools.lru_cache(maxsize=16384)
def like_prefix(pattern: str) -> str:
    """The literal text an SQL LIKE pattern starts with: every name it matches begins with it.

    The store hands these to its queries so that PostgreSQL can scan an index range before it applies LIKE.
    Cached: the due poller's look asks again, each interval, for every waiting pattern.
    """
    prefix: list[str] = []
    chars = iter(pattern)
    for char in chars:
        if char in "%_":
            break
        prefix.append(next(chars, "\\") if char == "\\" else char)
    return "".join(prefix)


def shortest_prefixes(prefixes: Iterable[str]) -> tuple[str, ...]:
    """The prefixes without those that start with another: every name one starts with, one of these starts."""
    kept: list[str] = []
    for prefix in sorted(set(prefixes), key=len):
        if not prefix.startswith(tuple(kept)):
            kept.append(prefix)
    return tuple(kept)


@functools.lru_cache(maxsize=8)
def coarsened(patterns: frozenset[tuple[str, str]], most: int) -> frozenset[tuple[str, str]]:
    """At most `most` (LIKE pattern, tag) pairs that match every name `patterns` match, and maybe more.

    Past `most`, the patterns give way to their fixed prefixes, cut as short
    as needed ("tenant-x/a%b" and "tenant-x/c%" to "tenant-x/%"): a superset,
    for a look whose every finding is checked again against the patterns.
    Cached: the waiters' patterns stay the same from one look to the next.
    """
    if len(patterns) <= most:
        return patterns
    prefixed = sorted({(like_prefix(pattern), tag) for pattern, tag in patterns})

    def cut(length: int) -> set[tuple[str, str]]:
        return {(prefix[:length], tag) for prefix, tag in prefixed}

    # The longest cut that leaves at most `most`: the count only grows with the length.
    shortest, longest = 0, max(len(prefix) for prefix, _ in prefixed)
    while shortest < longest:
        middle = (shortest + longest + 1) // 2
        if len(cut(middle)) <= most:
            shortest = middle
        else:
            longest = middle - 1
    return frozenset((grant_to_like(prefix + "*"), tag) for prefix, tag in cut(shortest))


def is_glob(name: str) -> bool:
    """Whether a namespace field holds a glob pattern ("mailera/*") rather than one namespace."""
    return "*" in name


# What a Claim or a Work subscription may ask by glob. Each waiting one is matched against
# every arriving event its globs' prefixes allow: 200 streams of 100 globs of 245 stars made
# every tenant's Accept take seconds. Real subscriptions name a few globs of a star or two.
MAX_GLOB_STARS = 4
MAX_GLOBS = 16


def check_globs(field: str, names: Sequence[str]) -> None:
    """Raises InvalidArgument, naming the entry of `field` and the bound, for globs past MAX_GLOB_STARS or MAX_GLOBS."""
    globs = 0
    for index, name in enumerate(names):
        stars = name.count("*")
        if stars > MAX_GLOB_STARS:
            raise InvalidArgument(
                f"{field}[{index}]", f"is a glob of {stars} '*'; a glob takes at most {MAX_GLOB_STARS}"
            )
        globs += stars > 0
    if globs > MAX_GLOBS:
        raise InvalidArgument(field, f"holds {globs} globs; a Claim or a subscription takes at most {MAX_GLOBS}")


def glob_within(pattern: str, grant: str) -> bool:
    """Whether every namespace the glob `pattern` matches is matched by the glob `grant`.

    Decided for the grants tokens hold (a name, "prefix*", "*"); for any
    other grant only a plain name the grant matches counts as within it.
    Conservative: a False may refuse a pattern that is in fact covered, never
    the other way round.
    """
    if grant in (pattern, "*"):
        return True
    star = grant.find("*")
    if star < 0:
        return False  # a name grants one namespace; `pattern` differs from it
    if star == len(grant) - 1:
        literal_prefix = pattern.split("*", 1)[0]
        # Every match of `pattern` starts with its literal prefix, so with the grant's prefix.
        return literal_prefix.startswith(grant[:-1])
    return not is_glob(pattern) and like_matcher((grant_to_like(grant),)).matches(pattern)


def glob_within_any(pattern: str, grants: Sequence[str]) -> bool:
    """Whether one of the globs `grants` covers every namespace `pattern` matches (see glob_within)."""
    return any(glob_within(pattern, grant) for grant in grants)
