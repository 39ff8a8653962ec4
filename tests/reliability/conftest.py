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

from inboxd.embedded_pg import EmbeddedPostgres
from inboxd.store.migrate import migrate
from tests.harness import throwaway_postgres
from tests.reliability import ledger
from tests.reliability.rig import discard_cluster

TOTALS_TEST = "test_totals.py"


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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The totals test judges the whole run, so it runs after every scenario."""
    last = [item for item in items if item.path.name == TOTALS_TEST and item.path.parent.name == "reliability"]
    if last:
        items[:] = [item for item in items if item not in last] + last


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        report.sections.append(("inboxd reliability seed", f"replay this run with {ledger.replay_hint()}"))
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not ledger.TALLIES:
        return
    terminalreporter.section("inboxd reliability")
    for line in ledger.summary_lines():
        terminalreporter.write_line(line)
