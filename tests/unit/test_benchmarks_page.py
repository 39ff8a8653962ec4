"""docs/benchmarks.md is what the report makes of the stored results: a change to the report's text fails this until
the page is regenerated (`python -m bench report`, which runs nothing)."""

from __future__ import annotations

from bench.report import DOC, markdown
from bench.suites import RESULTS, load


def test_the_benchmarks_page_is_the_report_of_the_stored_results() -> None:
    made = markdown(load("bench", RESULTS), load("peers", RESULTS), load("profiles-before"))
    assert DOC.read_text() == made, "docs/benchmarks.md is stale: run `python -m bench report` and commit it"
