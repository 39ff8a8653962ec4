"""Issue 31's benchmark: the window order, windows combined into a figure, the checkout's import check, the sink's
count, and the rows on the page.

Made-up windows and results in the shape bench/results/*.json store; nothing is measured.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from bench.checkout import check_imports, python_path
from bench.otlp_sink import span_count
from bench.phases.tracing import BEFORE, OFF, ON, figure_name, order, otel_variables
from bench.record import combined
from bench.report import targets_section
from bench.report_tracing import tracing
from bench.targets import targets, verdict
from tests.unit.test_bench_report import results


def test_windows_alternate_a_b_c_c_b_a_so_each_server_meets_early_and_late_moments_alike() -> None:
    assert order(1) == [BEFORE, OFF, ON, ON, OFF, BEFORE]
    assert order(2) == order(1) * 2
    mean = {s: sum(i for i, o in enumerate(order(1)) if o == s) / 2 for s in (BEFORE, OFF, ON)}
    assert len(set(mean.values())) == 1


def test_any_otel_variable_is_found_since_the_off_server_would_inherit_it() -> None:
    assert otel_variables({"PATH": "/bin", "OTEL_SDK_DISABLED": "true", "OTEL_TRACES_SAMPLER": "x"}) == [
        "OTEL_SDK_DISABLED",
        "OTEL_TRACES_SAMPLER",
    ]
    assert otel_variables({"HOTEL_X": "1"}) == []


def window(value: float, unit: str, seconds: float, server_s: float, p99: float) -> dict[str, Any]:
    count = round(value * seconds)
    return {
        "value": value,
        "unit": unit,
        "ops": count if unit == "tx/s" else count // 10,
        "units": count,
        "seconds": seconds,
        "p50_ms": p99 / 4,
        "p99_ms": p99,
        "errors": 0,
        "first_error": "",
        "cpu": {"seconds": seconds, "used": {"server": server_s, "postgres": seconds / 2}},
        "generator": "node h2",
    }


def test_a_servers_windows_combine_into_their_units_over_their_seconds_with_their_cpu_summed() -> None:
    fig = combined([window(2000.0, "rows/s", 8.0, 4.0, 10.0), window(3000.0, "rows/s", 4.0, 3.0, 30.0)])
    assert fig["value"] == pytest.approx((16_000 + 12_000) / 12.0, abs=0.1)
    assert (fig["units"], fig["seconds"], fig["p99_ms"], fig["p50_ms"]) == (28_000, 12.0, 30.0, 7.5)
    assert fig["cpu"] == {"seconds": 12.0, "used": {"server": 7.0, "postgres": 6.0}}
    assert [w["value"] for w in fig["windows"]] == [2000.0, 3000.0]
    accepts = combined([window(1000.0, "tx/s", 8.0, 2.0, 5.0)])
    assert (accepts["value"], accepts["ops"]) == (1000.0, 8000)


def test_the_checkout_refuses_a_package_that_still_comes_from_this_tree(tmp_path: Path) -> None:
    inside = {"inboxd": str(tmp_path / "server/inboxd/__init__.py")}
    check_imports(inside, tmp_path)
    with pytest.raises(RuntimeError, match="inboxd_client"):
        check_imports({**inside, "inboxd_client": "/work/x/clients/python/src/inboxd_client/__init__.py"}, tmp_path)
    assert python_path(tmp_path).split(":") == [str(tmp_path / "server"), str(tmp_path / "clients/python/src")]


def test_the_sink_counts_every_span_of_every_resource_and_scope() -> None:
    spans = [trace_pb2.Span(name=str(i)) for i in range(5)]
    request = trace_service_pb2.ExportTraceServiceRequest(
        resource_spans=[
            trace_pb2.ResourceSpans(scope_spans=[trace_pb2.ScopeSpans(spans=spans[:2]), trace_pb2.ScopeSpans()]),
            trace_pb2.ResourceSpans(scope_spans=[trace_pb2.ScopeSpans(spans=spans[2:])]),
        ]
    )
    assert span_count(request) == 5
    assert span_count(trace_service_pb2.ExportTraceServiceRequest()) == 0


def tracing_results(off_share: float = 0.99) -> dict[str, Any]:
    bench = results(0.9)
    bench["config"]["tracing_rounds"] = 1
    figs = bench["figures"]
    for kind, unit, rate, us in (("accept", "tx/s", 2500.0, 300e-6), ("drain", "rows/s", 4000.0, 100e-6)):
        before = window(rate, unit, 16.0, rate * 16 * us, 20.0)
        off = window(rate * off_share, unit, 16.0, rate * off_share * 16 * us, 21.0)
        on = window(rate * 0.5, unit, 16.0, rate * 0.5 * 16 * us * 2, 40.0)
        for server, w in ((BEFORE, before), (OFF, off), (ON, on)):
            fig = {**combined([w, w]), "order": "ABCCBA"}
            fig["windows"] = [{"value": w["value"]}] * 2
            figs[figure_name(kind, server)] = fig
    figs[figure_name("accept", ON)]["spans_server_sent"] = 40_960
    return bench


def rows(bench: dict[str, Any]) -> list[tuple[str, str]]:
    found = []
    for t in targets(bench):
        if t.issue == "31":
            m = t.measure(bench, None)
            found.append((m.shown if m.value is not None else m.missing, verdict(t, m)))
    return found


def test_issue_31s_rows_are_on_the_targets_table_off_within_two_percent_and_on_its_cost() -> None:
    bench = tracing_results()
    assert len([line for line in targets_section(bench, None) if line.startswith("| tracing |")]) == 4
    shown = rows(bench)
    assert shown[0] == ("0.990x (2,475 ÷ 2,500 tx/s; windows ABCCBA: off 2,475, 2,475, before 2,500, 2,500)", "yes")
    assert shown[1][0].startswith("0.990x (3,960 ÷ 4,000 rows/s;")
    assert shown[2] == (
        "600 µs on ÷ 300 µs off = 2.00x (+300 µs per Accept; rate 1,250 ÷ 2,475 tx/s; the traced servers sent "
        "40,960 spans in all)",
        "yes",
    )
    assert shown[3][0].startswith("200 µs on ÷ 100 µs off = 2.00x (+100 µs per drained event;")


def test_tracing_off_three_percent_slower_than_before_is_missed() -> None:
    assert [met for _s, met in rows(tracing_results(0.97))][:2] == ["**no**", "**no**"]


def test_a_figure_not_measured_says_why_and_shows_no_number() -> None:
    bench = results(0.9)
    assert all(s.endswith("had no tracing phase (run `make bench`)") for s, _v in rows(bench))
    bench["config"]["tracing_rounds"] = 1
    bench["tracing_unmeasured"] = {figure_name("accept", BEFORE): "CalledProcessError: git worktree add failed"}
    shown = rows(bench)
    assert all(v == "not measured" for _s, v in shown)
    assert shown[0][0] == "not measured: no `tracing.accept.off` in this run"
    bench["tracing_unmeasured"][figure_name("accept", OFF)] = "RuntimeError: boom"
    assert rows(bench)[0][0] == "not measured: RuntimeError: boom"
    bench["failed_phases"] = {"tracing": "OSError: boom"}
    assert rows(bench)[3][0] == "not measured: phase tracing failed: OSError: boom"


def test_the_tracing_section_names_the_old_servers_imports_and_each_servers_windows() -> None:
    assert tracing(results(0.9)) == []
    bench = tracing_results()
    bench["tracing_before"] = {"commit": "1bc5f2c", "imported": {"inboxd": "/tmp/x/server/inboxd/__init__.py"}}
    bench["tracing_unmeasured"] = {"tracing.other": "RuntimeError: boom"}
    page = "\n".join(tracing(bench))
    assert "imported inboxd from `/tmp/x/server/inboxd/__init__.py`" in page
    assert "| `tracing.accept.on` | 1,250, 1,250 | 1,250 tx/s | 40.00 ms |" in page
    assert "sent 40,960 spans from start to stop" in page
    assert "`tracing.other` not measured: `RuntimeError: boom`" in page
