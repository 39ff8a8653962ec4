"""The transition log at INFO: accepts summed per interval, never a line per event or per group."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

from inboxd.domain.vocabulary import AcceptOutcome, AcceptResult, EventKey, EventState, Namespace, NewEvent
from inboxd.observability.transition_log import TransitionLog
from tests.integration.helpers import captured_logs

EVENT = NewEvent(Namespace("ns"), EventKey("k"), "t", b"{}")
NOW = datetime(2026, 12, 1, tzinfo=UTC)


def results(*outcomes: AcceptOutcome) -> list[AcceptResult]:
    return [AcceptResult(o, EventState.PENDING, NOW) for o in outcomes]


def test_accepts_are_summed_into_one_info_line_per_interval() -> None:
    now = [0.0]
    transitions = TransitionLog(summary_seconds=10.0, clock=lambda: now[0])
    with captured_logs(logging.INFO) as out:
        for second in range(12):
            now[0] = float(second)
            outcomes = (AcceptOutcome.ACCEPTED, AcceptOutcome.DUPLICATE)
            transitions.accepted([EVENT, EVENT], results(*outcomes))
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["msg"] for line in lines] == ["accepts"]
    # The groups of seconds 0..10 are in the line written at second 10; second 11 waits for the next.
    assert (lines[0]["groups"], lines[0]["accepted"], lines[0]["duplicate"], lines[0]["seconds"]) == (11, 11, 11, 10.0)


def test_a_conflict_is_still_a_warning_of_its_own() -> None:
    transitions = TransitionLog(summary_seconds=3600.0)
    with captured_logs(logging.INFO) as out:
        transitions.accepted([EVENT], results(AcceptOutcome.CONFLICT))
    assert [json.loads(line)["msg"] for line in out.getvalue().splitlines()] == ["accept conflict"]
