"""The reliability suite's fixtures and reporting.

Every scenario runs against a DURABLE PostgreSQL (fsync and synchronous commit
on), never the fast throwaway cluster the rest of the suite shares: a promise
about what survives a crash means nothing on a database that may lose commits.
The run has one seed (INBOXD_RELIABILITY_SEED, or a random one), printed in
the summary and with every failure.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator

import pytest

from inboxd.serving.embedded_pg import EmbeddedPostgres
from inboxd.store.migrate import migrate
from tests.harness import throwaway_postgres
from tests.reliability import ledger
from tests.reliability.rig import discard_cluster

TOTALS_TEST = "test_totals.py"
WHOLE_RUN_TEST = "test_a_whole_run_covers_ten_thousand_events"


@pytest.fixture(scope="session")
def reliable_pg() -> Iterator[EmbeddedPostgres]:
    """One durable cluster for the scenarios that do not take the database itself down."""
    pg = throwaway_postgres(durable=True)
    try:
        yield pg
    finally:
        discard_cluster(pg)


@pytest.fixture(scope="session")
async def reliable_url(reliable_pg: EmbeddedPostgres) -> str:
    """The durable cluster's URL, migrated: what `inboxd serve` replicas are pointed at."""
    await migrate(reliable_pg.conninfo)
    return reliable_pg.conninfo


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected what they will
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The totals tests judge the scenarios selected, so they run after them.

    With no scenario selected there is nothing to judge: they are deselected, never
    skipped. The 10,000-event floor is a whole run's, so its test needs every scenario.
    """
    last = [item for item in items if item.path.name == TOTALS_TEST and item.path.parent.name == "reliability"]
    if not last:
        return
    selected = {_scenario_of(item) for item in items} & set(ledger.SCENARIOS)
    ledger.SELECTED.clear()
    ledger.SELECTED.update(str(s) for s in selected)
    dropped = [
        item for item in last if not selected or (WHOLE_RUN_TEST in item.name and selected != set(ledger.SCENARIOS))
    ]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = [item for item in items if item not in last] + [item for item in last if item not in dropped]


def _scenario_of(item: pytest.Item) -> object:
    """The scenario a test item runs: its module's SCENARIO, or its `scenario` parameter (failover's)."""
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "scenario" in callspec.params:
        return callspec.params["scenario"]
    return getattr(getattr(item, "module", None), "SCENARIO", None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        report.sections.append(("inboxd reliability seed", f"replay this run with {ledger.replay_hint()}"))
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In a pytest-xdist worker, send the table home: the controller prints it (tests/conftest.py)."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None and ledger.TALLIES:
        workeroutput["inboxd_reliability"] = ledger.summary_lines()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not ledger.TALLIES:
        return
    terminalreporter.section("inboxd reliability")
    for line in ledger.summary_lines():
        terminalreporter.write_line(line)
