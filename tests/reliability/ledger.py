"""The reliability suite's books: the run's seed, and what every scenario checked.

Each scenario opens a `Tally` and counts into it: the logical events it
accounted for, the deliveries it made, the events acknowledged, found, lost,
the rows or jobs beyond one per event, and the external or business effects,
with those beyond one per event. The conftest prints the tallies at the end of
the run, and a last test asserts that nothing was lost, duplicated or repeated.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

SEED_ENV = "INBOXD_RELIABILITY_SEED"
# The scenarios of issues 9 and 17, in the order the summary lists them.
SCENARIOS = (
    "duplicate storm",
    "distinct types",
    "crash before commit",
    "crash after commit",
    "database restart",
    "worker crash",
    "stale worker",
    "external effects",
    "replay after expiry",
    "poison messages",
    "failover",
)
# Run on request and reported, never asserted nor counted in the totals (make reliability-async).
REPORTED_ONLY = ("failover, asynchronous standby",)
MIN_TOTAL_EVENTS = 10_000


def _seed_from_env() -> int:
    raw = os.environ.get(SEED_ENV, "").strip()
    if raw:
        return int(raw)
    return random.SystemRandom().randrange(1, 2**31)


SEED = _seed_from_env()


def replay_hint() -> str:
    return f"{SEED_ENV}={SEED}"


def rng_for(scenario: str) -> random.Random:
    """The scenario's own generator: the same seed gives it the same draws whatever ran before it."""
    return random.Random(f"{SEED}/{scenario}")


@dataclass
class Tally:
    """What one scenario checked. `lost`, `duplicated` and `repeated` must end at zero."""

    scenario: str
    events: int = 0  # distinct logical events accounted for
    deliveries: int = 0  # Accept deliveries made, repeats and resends included
    acknowledged: int = 0  # events a client saw answered OK
    found: int = 0  # acknowledged events found in the database afterwards
    lost: int = 0  # acknowledged events missing (or, where workers run, never completed)
    duplicated: int = 0  # rows, jobs or ACCEPTED answers beyond one per logical event
    effects: int = 0  # external or business effects observed
    repeated: int = 0  # effects beyond one per event
    notes: dict[str, int] = field(default_factory=dict)
    finished: bool = False

    def account(self, acknowledged: Iterable[str], present: Iterable[str]) -> None:
        """Counts acknowledged events against those present (stored, or stored and completed)."""
        acked = set(acknowledged)
        here = set(present)
        self.acknowledged += len(acked)
        self.found += len(acked & here)
        self.lost += len(acked - here)

    def extra(self, per_event: Mapping[str, int]) -> int:
        """Counts rows/jobs/ACCEPTED answers beyond one per event; answers how many."""
        beyond = sum(n - 1 for n in per_event.values() if n > 1)
        self.duplicated += beyond
        return beyond

    def count_effects(self, per_event: Mapping[str, int]) -> int:
        """Counts effects per event, and those beyond one; answers how many were repeated."""
        beyond = sum(n - 1 for n in per_event.values() if n > 1)
        self.effects += sum(per_event.values())
        self.repeated += beyond
        return beyond

    def note(self, name: str, count: int = 1) -> None:
        self.notes[name] = self.notes.get(name, 0) + count

    def close(self) -> None:
        """The scenario's last word: nothing lost, duplicated or repeated."""
        assert (self.lost, self.duplicated, self.repeated) == (0, 0, 0), (
            f"{self.scenario}: lost {self.lost}, duplicated {self.duplicated}, repeated {self.repeated} "
            f"({replay_hint()})"
        )
        self.finished = True


TALLIES: dict[str, Tally] = {}
# The scenarios this run selected (set by the conftest at collection): what the totals judge.
SELECTED: set[str] = set()


def open_tally(scenario: str) -> Tally:
    """A fresh tally for `scenario` (one of SCENARIOS); a rerun in the same session starts over."""
    assert scenario in SCENARIOS + REPORTED_ONLY, scenario
    tally = Tally(scenario)
    TALLIES[scenario] = tally
    print(f"reliability scenario {scenario!r}, seed {SEED} ({replay_hint()})")
    return tally


def totals() -> Tally:
    total = Tally("total")
    for tally in (t for t in TALLIES.values() if t.scenario in SCENARIOS):
        for name in ("events", "deliveries", "acknowledged", "found", "lost", "duplicated", "effects", "repeated"):
            setattr(total, name, getattr(total, name) + getattr(tally, name))
    total.finished = all(TALLIES[s].finished for s in SCENARIOS if s in TALLIES)
    return total


COLUMNS = (
    ("events", "events"),
    ("deliveries", "deliveries"),
    ("acknowledged", "acked"),
    ("found", "found"),
    ("lost", "lost"),
    ("duplicated", "dup"),
    ("effects", "effects"),
    ("repeated", "repeated"),
)


def summary_lines() -> list[str]:
    """The table the terminal summary prints: one row per scenario that ran, then the totals."""
    name_width = max(len("scenario"), *(len(f"{s} (!)") + 1 for s in SCENARIOS + REPORTED_ONLY))
    header = "scenario".ljust(name_width) + "".join(f"{title:>12}" for _, title in COLUMNS)
    lines = [f"seed {SEED} (replay with {replay_hint()})", header]
    ordered = [TALLIES[s] for s in SCENARIOS if s in TALLIES]
    reported = [TALLIES[s] for s in REPORTED_ONLY if s in TALLIES]
    for tally in [*ordered, *([totals()] if ordered else []), *reported]:
        label = tally.scenario if tally.finished else f"{tally.scenario} (!)"
        if tally.scenario == "total":
            lines.append("-" * len(header))
        row = label.ljust(name_width) + "".join(f"{getattr(tally, attr):>12,}" for attr, _ in COLUMNS)
        lines.append(row)
    for tally in [*ordered, *reported]:
        if tally.notes:
            noted = ", ".join(f"{name} {count:,}" for name, count in tally.notes.items())
            lines.append(f"  {tally.scenario}: {noted}")
    if not all(t.finished for t in [*ordered, *reported]):
        lines.append("(!) the scenario did not finish: its counts are partial")
    return lines
