"""The run's verdict, after every scenario: nothing lost, duplicated or repeated, over 10,000 events or more.

The conftest moves this test to the end of the run. Run alone, or with some
scenarios deselected, it has nothing to judge and is skipped.
"""

from __future__ import annotations

import pytest

from tests.reliability import ledger


def test_the_whole_run_lost_duplicated_and_repeated_nothing_over_ten_thousand_events() -> None:
    missing = [s for s in ledger.SCENARIOS if s not in ledger.TALLIES]
    if missing:
        pytest.skip(f"not every scenario ran (missing: {', '.join(missing)}); the totals judge only a whole run")
    unfinished = [t.scenario for t in ledger.TALLIES.values() if not t.finished]
    assert not unfinished, f"scenarios that did not finish: {unfinished} ({ledger.replay_hint()})"
    total = ledger.totals()
    assert (total.lost, total.duplicated, total.repeated) == (0, 0, 0), ledger.replay_hint()
    assert total.events >= ledger.MIN_TOTAL_EVENTS, (
        f"only {total.events} events: the run must cover {ledger.MIN_TOTAL_EVENTS:,}"
    )
    assert total.found == total.acknowledged
