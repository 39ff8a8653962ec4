"""The run's verdict, after its scenarios: nothing lost, duplicated or repeated; a whole run covers 10,000 events.

The conftest moves these tests to the end of the run and tells them which
scenarios were selected. A partial run is judged on the scenarios it ran; with
none selected the tests are deselected (there is nothing to judge), and the
10,000-event floor is checked only when every scenario was selected.
"""

from __future__ import annotations

from tests.reliability import ledger


def test_the_selected_scenarios_all_ran_and_lost_duplicated_and_repeated_nothing() -> None:
    assert ledger.SELECTED, "no scenario selected: the conftest should have deselected this test"
    missing = sorted(ledger.SELECTED - set(ledger.TALLIES))
    assert not missing, f"selected scenarios that never opened their tally: {missing} ({ledger.replay_hint()})"
    judged = [ledger.TALLIES[s] for s in ledger.SCENARIOS if s in ledger.SELECTED]
    unfinished = [t.scenario for t in judged if not t.finished]
    assert not unfinished, f"scenarios that did not finish: {unfinished} ({ledger.replay_hint()})"
    for tally in judged:
        assert (tally.lost, tally.duplicated, tally.repeated) == (0, 0, 0), (tally.scenario, ledger.replay_hint())
        assert tally.found == tally.acknowledged, (tally.scenario, ledger.replay_hint())
        assert tally.events > 0, f"{tally.scenario} accounted for no event: it proved nothing"


def test_a_whole_run_covers_ten_thousand_events() -> None:
    assert ledger.SELECTED == set(ledger.SCENARIOS), "the conftest runs this only for a whole run"
    total = ledger.totals()
    assert (total.lost, total.duplicated, total.repeated) == (0, 0, 0), ledger.replay_hint()
    assert total.events >= ledger.MIN_TOTAL_EVENTS, (
        f"only {total.events} events: the run must cover {ledger.MIN_TOTAL_EVENTS:,}"
    )
    assert total.found == total.acknowledged
