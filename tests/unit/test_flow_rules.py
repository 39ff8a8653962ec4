"""Flow-control rules in the domain: each field checked by name, a change applied to the rule, the rule in words."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from inboxd.domain.errors import InvalidArgument, NotFound, TransitionNotAllowed
from inboxd.domain.flow_rules import (
    FlowChange,
    FlowRule,
    changed_rule,
    in_words,
    may_release_events,
    specificity,
)

NOW = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)


def change(**fields: Any) -> FlowChange:
    return FlowChange(**{"pattern": "mailera/acme", "reason": "tenant import", **fields})


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"pattern": ""}, "pattern", "is required"),
        ({"pattern": "x" * 513}, "pattern", "the limit is 512"),
        ({"pattern": "a\x00b"}, "pattern", "NUL"),
        ({"max_in_flight": 1_000_001}, "max_in_flight", "1 to 1,000,000"),
        ({"max_in_flight": -1}, "max_in_flight", "1 to 1,000,000"),
        ({"rate": math.nan}, "rate", "events per second"),
        ({"rate": math.inf}, "rate", "events per second"),
        ({"rate": -1.0}, "rate", "events per second"),
        ({"rate": 1_000_000.5}, "rate", "at most 1,000,000"),
        ({"burst": 1_000_001}, "burst", "1 to 1,000,000"),
        ({"weight": 1001}, "weight", "1 to 1,000"),
        ({"paused": False, "resume_ramp": timedelta(milliseconds=500)}, "resume_ramp", "1 s to 24 h"),
        ({"paused": False, "resume_ramp": timedelta(hours=25)}, "resume_ramp", "1 s to 24 h"),
        ({"resume_ramp": timedelta(minutes=5)}, "resume_ramp", "paused = false"),
        ({"paused": True, "resume_ramp": timedelta(minutes=5)}, "resume_ramp", "paused = false"),
        ({"ramp_rate": 10.0}, "ramp_rate", "goes with resume_ramp"),
        ({"paused": False, "resume_ramp": timedelta(minutes=5), "ramp_rate": math.nan}, "ramp_rate", "per second"),
        ({"remove": True, "weight": 2}, "remove", "stands alone"),
        ({"remove": True, "paused": False}, "remove", "stands alone"),
        ({"reason": ""}, "reason", "is required"),
        ({"reason": "   "}, "reason", "is required"),
    ],
)
def test_a_change_refuses_each_bad_field_by_name(fields: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        change(**fields)
    assert caught.value.field == field
    assert words in str(caught.value)


def test_zero_in_a_change_removes_a_limit_and_a_weight_of_zero_is_one() -> None:
    limited = FlowRule("mailera/acme", max_in_flight=5, rate=50.0, burst=10, weight=3)
    after = changed_rule(limited, change(max_in_flight=0, rate=0.0, burst=0, weight=0), now=NOW, actor="ops")
    assert after == FlowRule("mailera/acme", updated_at=NOW, updated_by="ops")


def test_absent_fields_keep_what_the_rule_had() -> None:
    limited = FlowRule("mailera/acme", max_in_flight=5, rate=50.0, burst=10, weight=3, paused=True)
    after = changed_rule(limited, change(max_in_flight=7), now=NOW, actor="ops")
    assert after == FlowRule(
        "mailera/acme", max_in_flight=7, rate=50.0, burst=10, weight=3, paused=True, updated_at=NOW, updated_by="ops"
    )


def test_a_resume_with_a_ramp_sets_it_and_a_pause_or_a_plain_resume_clears_it() -> None:
    paused = FlowRule("mailera/acme", rate=50.0, paused=True)
    ramped = changed_rule(paused, change(paused=False, resume_ramp=timedelta(minutes=5)), now=NOW, actor="ops")
    assert ramped is not None
    assert (ramped.paused, ramped.resumed_at, ramped.ramp, ramped.ramp_rate) == (
        False, NOW, timedelta(minutes=5), 50.0
    )  # fmt: skip
    again = changed_rule(ramped, change(paused=True), now=NOW, actor="ops")
    assert again is not None and (again.resumed_at, again.ramp, again.ramp_rate) == (None, None, None)
    ramp_to = change(paused=False, resume_ramp=timedelta(seconds=30), ramp_rate=100.0)
    explicit = changed_rule(again, ramp_to, now=NOW, actor="ops")
    assert explicit is not None and explicit.ramp_rate == 100.0
    plain = changed_rule(replace_paused(explicit), change(paused=False), now=NOW, actor="ops")
    assert plain is not None and (plain.paused, plain.ramp) == (False, None)


def test_a_ramps_rate_holds_after_it_unless_the_rule_has_a_rate_of_its_own() -> None:
    ramp = change(paused=False, resume_ramp=timedelta(minutes=10), ramp_rate=200.0)
    no_rate = changed_rule(FlowRule("mailera/acme", paused=True), ramp, now=NOW, actor="ops")
    assert no_rate is not None and (no_rate.rate, no_rate.ramp_rate) == (200.0, 200.0)
    assert in_words(no_rate) == "rate 200/s, ramp to 200/s over 10m"
    own_rate = changed_rule(FlowRule("mailera/acme", rate=500.0, paused=True), ramp, now=NOW, actor="ops")
    assert own_rate is not None and (own_rate.rate, own_rate.ramp_rate) == (500.0, 200.0)
    # A rate set with the resume is the operator's: it holds after the ramp.
    both = changed_rule(FlowRule("mailera/acme", paused=True), change(**{**_fields(ramp), "rate": 50.0}), now=NOW,
                        actor="ops")  # fmt: skip
    assert both is not None and (both.rate, both.ramp_rate) == (50.0, 200.0)


def _fields(one: FlowChange) -> dict[str, Any]:
    return {"paused": one.paused, "resume_ramp": one.resume_ramp, "ramp_rate": one.ramp_rate}


def replace_paused(rule: FlowRule) -> FlowRule:
    return FlowRule(rule.pattern, rate=rule.rate, paused=True)


def test_a_ramp_needs_a_rate_and_a_paused_rule() -> None:
    ramp = change(paused=False, resume_ramp=timedelta(minutes=1))
    with pytest.raises(InvalidArgument) as caught:
        changed_rule(FlowRule("mailera/acme", paused=True), ramp, now=NOW, actor="ops")
    assert caught.value.field == "ramp_rate"
    assert "a ramp climbs to a rate: set ramp_rate or rate" in str(caught.value)
    with pytest.raises(TransitionNotAllowed, match="resume_ramp: the rule for 'mailera/acme' is not paused"):
        changed_rule(FlowRule("mailera/acme", rate=5.0), ramp, now=NOW, actor="ops")
    with pytest.raises(TransitionNotAllowed):
        changed_rule(None, ramp, now=NOW, actor="ops")


def test_removing_answers_none_and_removing_no_rule_is_not_found() -> None:
    assert changed_rule(FlowRule("mailera/acme"), change(remove=True), now=NOW, actor="ops") is None
    with pytest.raises(NotFound, match="no flow-control rule for 'mailera/acme'"):
        changed_rule(None, change(remove=True), now=NOW, actor="ops")


def test_a_namespace_outranks_every_pattern_and_patterns_rank_by_literal_characters() -> None:
    assert specificity("mailera/acme") == 1_000_000 + len("mailera/acme")
    assert specificity("mailera/*") == len("mailera/")
    assert specificity("*") == 0
    assert specificity("mailera/a*") > specificity("mailera/*") > specificity("*")
    assert specificity("x" * 512 + "*") < specificity("a")
    rule = FlowRule("mailera/a_%*")
    assert (rule.is_pattern, rule.like_pattern) == (True, "mailera/a\\_\\%%")
    assert not FlowRule("mailera/acme").is_pattern


def test_a_rule_in_words() -> None:
    assert in_words(None) == "none"
    assert in_words(FlowRule("x")) == "no limits"
    full = FlowRule("x", max_in_flight=5, rate=50.0, burst=10, weight=2, paused=True)
    assert in_words(full) == "max_in_flight 5, rate 50/s burst 10, weight 2, paused"
    assert in_words(FlowRule("x", rate=0.5)) == "rate 0.5/s"
    ramping = FlowRule("x", rate=50.0, resumed_at=NOW, ramp=timedelta(minutes=5), ramp_rate=100.0)
    assert in_words(ramping) == "rate 50/s, ramp to 100/s over 5m"


@pytest.mark.parametrize(
    ("before", "after", "releases"),
    [
        (FlowRule("x", paused=True), FlowRule("x"), True),
        (FlowRule("x"), FlowRule("x", paused=True), False),
        (FlowRule("x", max_in_flight=5), FlowRule("x", max_in_flight=6), True),
        (FlowRule("x", max_in_flight=5), FlowRule("x"), True),
        (FlowRule("x", max_in_flight=5), FlowRule("x", max_in_flight=4), False),
        (FlowRule("x", rate=5.0), FlowRule("x", rate=6.0), True),
        (FlowRule("x", rate=5.0), FlowRule("x", rate=4.0), False),
        (FlowRule("x", weight=2), FlowRule("x", weight=3), True),
        (FlowRule("x", max_in_flight=5), None, True),
        (None, FlowRule("x", max_in_flight=5), False),
        (None, FlowRule("x", weight=4), True),
    ],
)
def test_a_change_that_may_release_events_is_known(
    before: FlowRule | None, after: FlowRule | None, releases: bool
) -> None:
    assert may_release_events(before, after) is releases
