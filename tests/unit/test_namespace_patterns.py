"""Namespace patterns: a token's grants, their LIKE form, and matching in Python as PostgreSQL matches."""

from __future__ import annotations

import pytest

from inboxd.config.tokens import Caller, Scope
from inboxd.domain.namespace_patterns import grant_to_like, like_matcher, like_prefix


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
    assert (like_matcher(caller.like_patterns()).fullmatch(namespace) is not None) is granted


def test_no_patterns_match_nothing() -> None:
    assert like_matcher(()).fullmatch("") is None
    assert not Caller("t", frozenset({Scope.WORK}), ()).may_see("a")


def test_a_token_granted_every_namespace_sees_any_name() -> None:
    assert Caller("t", frozenset({Scope.WORK}), ("x", "*")).may_see("anything/at all")
