"""Flow-control rules (DESIGN, Flow control): what a rule says, how a change to it is checked and applied.

A rule names a namespace or a namespace pattern (the tokens' glob syntax)
and paces the claims of the namespaces it governs: max_in_flight, a rate
with its burst, paused, a weight in fair claiming, and while a resume ramps
up, the ramp. The claim statement reads the rules from PostgreSQL; this
module is what an operator's change goes through before it is written:
checked field by field, applied to the rule as it stood (read under its
lock), and told in words for the audit. Nothing here knows gRPC or PostgreSQL.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TypeVar

from inboxd.domain import validation
from inboxd.domain.errors import InvalidArgument, NotFound, TransitionNotAllowed
from inboxd.domain.namespace_patterns import grant_to_like, is_glob

MAX_IN_FLIGHT = 1_000_000
MAX_RATE = 1_000_000.0
MAX_BURST = 1_000_000
MAX_WEIGHT = 1000
MIN_RAMP = timedelta(seconds=1)
MAX_RAMP = timedelta(hours=24)
# A namespace's own rule ranks above every pattern (a pattern's specificity is
# at most its 512 bytes of literal characters): see specificity().
_NAME_SPECIFICITY = 1_000_000
# How many of a rule's changes Get answers, newest first.
RECENT_CHANGES = 20
# In words, before a rule exists and after it is removed.
NO_RULE = "none"

_Limit = TypeVar("_Limit", int, float)


@dataclass(frozen=True, slots=True)
class FlowRule:
    """One rule as stored: None for a limit, rate or burst means none (a burst of None: one second's rate)."""

    pattern: str
    max_in_flight: int | None = None
    rate: float | None = None
    burst: int | None = None
    paused: bool = False
    weight: int = 1
    # Set by a resume with a ramp (all three or none): from resumed_at, for
    # ramp, the claim rate climbs from zero to ramp_rate; then `rate` holds
    # (a resume with a ramp sets it to ramp_rate when the rule had none).
    resumed_at: datetime | None = None
    ramp: timedelta | None = None
    ramp_rate: float | None = None
    updated_at: datetime | None = None
    updated_by: str = ""

    @property
    def is_pattern(self) -> bool:
        return is_glob(self.pattern)

    @property
    def like_pattern(self) -> str:
        """The pattern as SQL LIKE, as the tokens' grants are translated (the claim statement matches with it)."""
        return grant_to_like(self.pattern)

    @property
    def specificity(self) -> int:
        return specificity(self.pattern)


def specificity(pattern: str) -> int:
    """Orders the rules matching one namespace: its own name above any pattern, then the most literal characters."""
    if not is_glob(pattern):
        return _NAME_SPECIFICITY + len(pattern)
    return sum(1 for char in pattern if char != "*")


def check_pattern(field: str, pattern: str) -> str:
    """A namespace or a namespace pattern, checked as namespaces are: non-empty, at most 512 bytes, no NUL."""
    return validation.check_identity(field, pattern)


@dataclass(frozen=True, slots=True)
class FlowChange:
    """An operator's change of one rule: None keeps a field as it is; 0 removes a limit, a rate or a burst.

    `weight` 0 means 1. `resume_ramp` goes with paused=False on a paused
    rule; `ramp_rate` 0 then means the rule's rate, and a rule with no rate
    takes ramp_rate as its rate, which holds after the ramp. `remove` stands alone.
    """

    pattern: str
    reason: str
    max_in_flight: int | None = None
    rate: float | None = None
    burst: int | None = None
    paused: bool | None = None
    weight: int | None = None
    resume_ramp: timedelta | None = None
    ramp_rate: float = 0.0
    remove: bool = False

    def __post_init__(self) -> None:
        """Raises InvalidArgument naming the first field that cannot be taken, whatever the rule is now."""
        check_pattern("pattern", self.pattern)
        if self.max_in_flight is not None:
            _in_range("max_in_flight", self.max_in_flight, MAX_IN_FLIGHT, "0 removes the limit")
        if self.rate is not None:
            _check_rate("rate", self.rate, "0 removes the rate limit")
        if self.burst is not None:
            _in_range("burst", self.burst, MAX_BURST, "0 means one second's worth of rate")
        if self.weight is not None:
            _in_range("weight", self.weight, MAX_WEIGHT, "0 means 1")
        if self.resume_ramp is not None:
            if not MIN_RAMP <= self.resume_ramp <= MAX_RAMP:
                raise InvalidArgument(
                    "resume_ramp", f"is {self.resume_ramp.total_seconds():g} s; a ramp lasts 1 s to 24 h"
                )
            if self.paused is not False:
                raise InvalidArgument("resume_ramp", "goes with paused = false: a ramp is how a paused rule resumes")
        _check_rate("ramp_rate", self.ramp_rate, "0 means the rule's rate")
        if self.ramp_rate and self.resume_ramp is None:
            raise InvalidArgument("ramp_rate", "goes with resume_ramp: the rate a resume ramps up to")
        if self.remove and self._changes_something():
            raise InvalidArgument("remove", "stands alone: a removed rule keeps no field, so set none with it")
        validation.required_reason(self.reason)

    def _changes_something(self) -> bool:
        fields = (self.max_in_flight, self.rate, self.burst, self.paused, self.weight, self.resume_ramp)
        return any(value is not None for value in fields) or bool(self.ramp_rate)


def _in_range(field: str, value: int, most: int, zero: str) -> None:
    if not 0 <= value <= most:
        raise InvalidArgument(field, f"is {value}; it takes 1 to {most:,} ({zero})")


def _check_rate(field: str, value: float, zero: str) -> None:
    if not math.isfinite(value) or not 0 <= value <= MAX_RATE:
        raise InvalidArgument(
            field, f"is {value}; it takes events per second above 0, at most {MAX_RATE:,.0f} ({zero})"
        )


def changed_rule(before: FlowRule | None, change: FlowChange, *, now: datetime, actor: str) -> FlowRule | None:
    """The rule after `change`, applied to the rule as it stands (None: none yet); None when removed.

    Raises NotFound when removing a rule that does not exist, and
    TransitionNotAllowed for a ramp on a rule that is not paused.
    """
    if change.remove:
        if before is None:
            raise NotFound(f"no flow-control rule for {change.pattern!r} to remove")
        return None
    rule = before or FlowRule(change.pattern)
    resuming = rule.paused and change.paused is False
    rule = replace(
        rule,
        max_in_flight=_limit(rule.max_in_flight, change.max_in_flight),
        rate=_limit(rule.rate, change.rate),
        burst=_limit(rule.burst, change.burst),
        paused=rule.paused if change.paused is None else change.paused,
        weight=rule.weight if change.weight is None else change.weight or 1,
        updated_at=now,
        updated_by=actor,
    )
    if change.resume_ramp is not None:
        if not resuming:
            raise TransitionNotAllowed(
                f"resume_ramp: the rule for {change.pattern!r} is not paused; only a paused rule resumes with a ramp"
            )
        ramp_rate = change.ramp_rate or rule.rate
        if not ramp_rate:
            raise InvalidArgument("ramp_rate", "a ramp climbs to a rate: set ramp_rate or rate")
        # The ramp's rate holds after it unless the rule has a rate of its own: the ramp exists so that the
        # backlog never hits the downstream at once, and a rule with no rate would release it all at its end.
        return replace(rule, rate=rule.rate or ramp_rate, resumed_at=now, ramp=change.resume_ramp, ramp_rate=ramp_rate)
    if resuming or change.paused:
        # Resumed at once, or paused again: no ramp holds any more.
        return replace(rule, resumed_at=None, ramp=None, ramp_rate=None)
    return rule


def _limit(kept: _Limit | None, asked: _Limit | None) -> _Limit | None:
    """A limit after a change: absent keeps it, 0 removes it."""
    if asked is None:
        return kept
    return asked or None


def may_release_events(before: FlowRule | None, after: FlowRule | None) -> bool:
    """Whether the change can make events claimable that were not: waiting Claims must look again."""
    if before is None:
        return after is not None and after.weight != 1
    if after is None:
        return True
    return (
        (before.paused and not after.paused)
        or _raised(before.max_in_flight, after.max_in_flight)
        or _raised(before.rate, after.rate)
        or _raised(before.burst, after.burst)
        or before.weight != after.weight
    )


def _raised(before: float | None, after: float | None) -> bool:
    """None is no limit: above every number."""
    if before is None:
        return False
    return after is None or after > before


def in_words(rule: FlowRule | None) -> str:
    """A rule as its audit row tells it: "max_in_flight 5, rate 50/s burst 10, weight 2, paused"."""
    if rule is None:
        return NO_RULE
    parts: list[str] = []
    if rule.max_in_flight is not None:
        parts.append(f"max_in_flight {rule.max_in_flight}")
    if rule.rate is not None:
        parts.append(f"rate {rule.rate:g}/s" + (f" burst {rule.burst}" if rule.burst is not None else ""))
    elif rule.burst is not None:
        parts.append(f"burst {rule.burst}")
    if rule.weight != 1:
        parts.append(f"weight {rule.weight}")
    if rule.paused:
        parts.append("paused")
    if rule.ramp is not None and rule.ramp_rate is not None:
        parts.append(f"ramp to {rule.ramp_rate:g}/s over {_duration(rule.ramp)}")
    return ", ".join(parts) or "no limits"


def _duration(span: timedelta) -> str:
    seconds = span.total_seconds()
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


@dataclass(frozen=True, slots=True)
class FlowFigures:
    """Live from PostgreSQL: namespaces with open events, their events leased now, their PENDING events."""

    namespaces: int = 0
    in_flight: int = 0
    pending: int = 0


@dataclass(frozen=True, slots=True)
class FlowControl:
    """A rule and what it governs now; `throttled_claims` is this server process's count (as its metrics)."""

    rule: FlowRule
    figures: FlowFigures
    throttled_claims: int = 0


@dataclass(frozen=True, slots=True)
class FlowChangeRecord:
    """One audited change of a rule: who, why, when, and the rule before and after in words."""

    pattern: str
    actor: str
    reason: str
    changed_at: datetime
    before: str
    after: str


@dataclass(frozen=True, slots=True)
class NamespaceFlow:
    """What governs one namespace (or a rule's exact pattern): the rule, its recent changes, live figures.

    `control` is None when no rule governs it (no limits, weight 1).
    """

    control: FlowControl | None
    changes: tuple[FlowChangeRecord, ...]
    figures: FlowFigures


@dataclass(frozen=True, slots=True)
class RuleChanged:
    """What SetFlowControl did: the rule before (None: created) and after (None: removed)."""

    before: FlowRule | None
    after: FlowRule | None
