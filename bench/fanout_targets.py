"""The target of issue 46's subscriptions (fan-out at accept), a ratio of two figures of one run.

As in targets.py: a figure that could not be measured says why, never a number.
"""

from __future__ import annotations

from bench.phases.fanout import CALLERS, NONE, THREE
from bench.target_kinds import Bar, Results, Target, _Ratio

FANOUT_BAR = Bar(0.7)


def fanout_targets(bench: Results) -> list[Target]:
    three, none = f"{THREE}.c{CALLERS}", f"{NONE}.c{CALLERS}"
    return [
        Target(
            "46",
            f"Accept at {CALLERS} callers into a namespace three subscriptions match (events accepted, not copies) "
            "÷ the same without subscriptions, windows alternating A B B A (none, three)",
            ">= 0.7x",
            _Ratio(three, none),
            FANOUT_BAR,
            (three, none),
        )
    ]
