"""Namespace patterns: a token's grants, their LIKE form, and matching in Python as PostgreSQL matches."""

from __future__ import annotations

import random
import re
import time

import pytest

from inboxd.config.tokens import Caller, Scope
from inboxd.domain.errors import InvalidArgument
from inboxd.domain.namespace_patterns import (
    MAX_GLOB_STARS,
    MAX_GLOBS,
    check_globs,
    coarsened,
    grant_to_like,
    like_matcher,
    like_prefix,
)


def test_a_like_patterns_prefix_is_its_literal_start() -> None:
    assert like_prefix("mailera/%") == "mailera/"
    assert like_prefix(r"a\_b/%") == "a_b/"
    assert like_prefix("%/prod") == ""
    assert like_prefix("exact") == "exact"


def test_a_grant_escapes_what_like_would_read_as_a_wildcard() -> None:
    assert grant_to_like("mailera/*") == "mailera/%"
    assert grant_to_like(r"a_b%c\d*") == r"a\_b\%c\\d%"


@pytest.mark.parametrize(
    ("grant", "namespace", "granted"),
    [
        ("mailera/*", "mailera/prod", True),
        ("mailera/*", "mailera/", True),
        ("mailera/*", "mailerb/prod", False),
        ("a_b", "axb", False),
        ("a_b", "a_b", True),
        ("50%", "50x", False),
        ("50%", "50%", True),
        ("*/prod", "x/y/prod", True),
        ("*/prod", "x/prod/y", False),
        ("line*", "line\nbreak", True),
    ],
)
def test_a_token_sees_a_namespace_only_through_its_grants(grant: str, namespace: str, granted: bool) -> None:
    caller = Caller("t", frozenset({Scope.WORK}), (grant,))
    assert caller.may_see(namespace) is granted
    assert like_matcher(caller.like_patterns()).matches(namespace) is granted


def test_no_patterns_match_nothing() -> None:
    assert not like_matcher(()).matches("")
    assert not Caller("t", frozenset({Scope.WORK}), ()).may_see("a")


def test_a_token_granted_every_namespace_sees_any_name() -> None:
    assert Caller("t", frozenset({Scope.WORK}), ("x", "*")).may_see("anything/at all")


@pytest.mark.parametrize(
    ("grant", "namespace", "granted"),
    [
        ("shop*", "shopping", True),
        ("shop*", "Shopping", False),
        ("*", "a/b/c", True),
        ("a*b*c", "abc", True),
        ("a*b*c", "acb", False),
        ("a*a", "a", False),
        ("a*a", "aa", True),
        ("*/*/orders", "x//orders", True),
        ("*/*/orders", "x/orders", False),
        ("a_b*", "a_bc", True),
        ("a%b*", "a%bc", True),
        ("a%b*", "axbc", False),
        ("a\\b*", "a\\bc", True),
        ("mailera/*", "mailera", False),
        ("*x", "", False),
        ("", "", True),
    ],
)
def test_glob_semantics_stay_those_of_like(grant: str, namespace: str, granted: bool) -> None:
    """`*` crosses `/`, a grant is a prefix only through its `*`, case counts, `_ % \\` are literal."""
    assert Caller("t", frozenset({Scope.WORK}), (grant,)).may_see(namespace) is granted


def _reference_like(pattern: str, name: str) -> bool:
    """The regex translation the matcher replaced (exponential at worst, fine on short names)."""
    parts: list[str] = []
    chars = iter(pattern)
    for char in chars:
        if char == "\\":
            parts.append(re.escape(next(chars, "\\")))
        else:
            parts.append({"%": ".*", "_": "."}.get(char) or re.escape(char))
    return re.fullmatch("".join(parts), name, re.DOTALL) is not None


def test_the_matcher_agrees_with_the_regex_it_replaced_on_short_names() -> None:
    rng = random.Random(26)
    for _ in range(20_000):
        pattern = "".join(rng.choice("ab/%_\\") for _ in range(rng.randrange(0, 8)))
        name = "".join(rng.choice("ab/%_\\\n") for _ in range(rng.randrange(0, 10)))
        assert like_matcher((pattern,)).matches(name) is _reference_like(pattern, name), (pattern, name)


def test_a_512_byte_namespace_against_a_five_star_grant_matches_in_under_a_millisecond() -> None:
    # Every slash is a place the stars could split the name; the name never ends in "orders".
    namespace = "/" * 511 + "x"
    caller = Caller("t", frozenset({Scope.WORK}), ("*/*/*/*/*/orders",))
    fastest = float("inf")
    for _ in range(50):  # the fastest of many: a loaded machine slows some runs, not the matcher
        started = time.perf_counter()
        assert not caller.may_see(namespace)
        fastest = min(fastest, time.perf_counter() - started)
    assert fastest < 0.001
    assert caller.may_see("/" * 506 + "orders")


def test_many_patterns_coarsen_to_few_that_still_match_every_name_they_matched() -> None:
    rng = random.Random(7)
    patterns = frozenset(
        (grant_to_like(f"tenant-{t}/w{i}-{j}" + "*a" * rng.randint(1, 4)), kind)
        for t in "xy"
        for i in range(40)
        for j in range(4)
        for kind in ("", "order.paid")
    )
    coarse = coarsened(patterns, 64)
    assert len(coarse) <= 64
    names = [
        f"tenant-{t}/w{i}-{j}" + "a" * 5 + f"{k}" for t in "xyz" for i in range(40) for j in range(4) for k in "ab"
    ]
    for name in names:
        for kind in ("", "order.paid"):
            wanted = like_matcher(tuple(p for p, k in patterns if k == kind)).matches(name)
            covered = like_matcher(tuple(p for p, k in coarse if k == kind)).matches(name)
            assert covered or not wanted, name
    assert coarsened(frozenset(list(patterns)[:10]), 64) == frozenset(list(patterns)[:10])


def test_a_glob_past_its_stars_or_a_filter_past_its_globs_is_refused_naming_the_bound() -> None:
    check_globs("namespaces", ["plain", "a/" + "*" * MAX_GLOB_STARS, *[f"g{i}/*" for i in range(MAX_GLOBS - 1)]])
    with pytest.raises(InvalidArgument, match=rf"namespaces\[1\]: is a glob of {MAX_GLOB_STARS + 1} '\*'"):
        check_globs("namespaces", ["plain", "*" * (MAX_GLOB_STARS + 1)])
    with pytest.raises(InvalidArgument, match=rf"namespaces: holds {MAX_GLOBS + 1} globs"):
        check_globs("namespaces", [f"g{i}/*" for i in range(MAX_GLOBS + 1)])
