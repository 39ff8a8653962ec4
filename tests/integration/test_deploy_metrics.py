"""Every metric and label the Grafana dashboard and the Prometheus alerts use is one a running server exports.

Read from a real server's /metrics after a little of everything (an accept,
a claim, a stale complete, a completion), so labelled series exist. A name
or label that the server renames, or that a dashboard author guessed, fails
here rather than on an operator's empty panel or silent alert.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path

import grpc
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd_client.v1 import admin_pb2, admin_pb2_grpc, inbox_pb2, inbox_pb2_grpc
from tests.conftest import CLOCKED_SETTINGS, FakeClock
from tests.edge.ops_probe import edge_metrics_text
from tests.integration.helpers import accept_request, expect_status, seconds
from tests.integration.test_claims import claim_one, fenced
from tests.integration.test_metrics import http_get

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy/grafana/inboxd.json"
ALERTS = ROOT / "deploy/prometheus/alerts.yml"
# Labels Prometheus itself attaches to every scraped series.
TARGET_LABELS = {"instance", "job"}

_METRIC = re.compile(r"\b(inboxd_[a-z0-9_]+)\b")
_SELECTOR = re.compile(r"\b(inboxd_[a-z0-9_]+)\s*\{([^}]*)\}")
_MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)")
_TEMPLATE_LABEL = re.compile(r"\{\{\s*\$?(?:labels\.)?([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}")
_LABEL_VALUES = re.compile(r"label_values\(\s*(inboxd_[a-z0-9_]+)\s*,\s*([a-zA-Z_]+)\s*\)")


@pytest.fixture(scope="module")
async def exported(db: Database) -> AsyncIterator[dict[str, set[str]]]:
    """Every series name the server exports, with the label names seen on it."""
    clock = FakeClock()
    settings = replace(CLOCKED_SETTINGS, metrics_listen="127.0.0.1:0")
    running: RunningServer = await start_server(settings, db, clock=clock)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            work = inbox_pb2_grpc.InboxServiceStub(channel)
            ns = f"deploy/{uuid.uuid4().hex}"
            await work.Accept(accept_request(ns, "a"))
            crashed = await claim_one(work, ns, lease=seconds(5))
            clock.advance(6)
            taken = await claim_one(work, ns)  # the expired lease, taken over
            await expect_status(work.Complete(inbox_pb2.CompleteRequest(**fenced(crashed))), grpc.StatusCode.ABORTED)
            await work.Complete(inbox_pb2.CompleteRequest(**fenced(taken)))
            # A destination, so its breaker's series exist (it delivers nothing: this server's runner is off).
            admin = admin_pb2_grpc.InboxAdminServiceStub(channel)
            await admin.CreateDestination(
                admin_pb2.CreateDestinationRequest(
                    name=ns.replace("/", "-"), url="https://hooks.example.com/in", namespace_pattern=ns, reason="t"
                )
            )
            assert running.ops is not None and running.ops.metrics_port is not None
            await running.ops.refresh_stats()
            status, body = await http_get(running.ops.metrics_port, "/metrics")
            await admin.DeleteDestination(admin_pb2.DeleteDestinationRequest(name=ns.replace("/", "-"), reason="t"))
        assert status == "HTTP/1.1 200 OK"
        # The edge's own inboxd_edge_* metrics, which the dashboard's edge row and the edge's alerts read.
        edge_body = await edge_metrics_text(f"127.0.0.1:{running.port}")
    finally:
        await running.stop(1.0)
    names: dict[str, set[str]] = {}
    for family in [*text_string_to_metric_families(body), *text_string_to_metric_families(edge_body)]:
        names.setdefault(family.name, set())
        for sample in family.samples:
            names.setdefault(sample.name, set()).update(sample.labels)
            names[family.name].update(sample.labels)
    yield names


def _dashboard_queries() -> Iterator[tuple[str, str, str]]:
    """(where, PromQL, legend) of every panel target and every templating query."""
    dashboard = json.loads(DASHBOARD.read_text())
    for panel in dashboard["panels"]:
        for target in panel.get("targets", ()):
            yield f"panel {panel['title']!r}", target["expr"], target.get("legendFormat", "")
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            yield f"variable {variable['name']!r}", variable["definition"], ""


def _alert_queries() -> Iterator[tuple[str, str, str]]:
    for group in yaml.safe_load(ALERTS.read_text())["groups"]:
        for rule in group["rules"]:
            yield f"alert {rule['alert']}", rule["expr"], " ".join(rule.get("annotations", {}).values())


def _problems(where: str, expr: str, text: str, exported: dict[str, set[str]]) -> list[str]:
    metrics = set(_METRIC.findall(expr))
    problems = [f"{where}: {name} is not exported" for name in sorted(metrics) if name not in exported]
    known = set(TARGET_LABELS)
    for name in metrics & exported.keys():
        known |= exported[name]
    for name, matchers in _SELECTOR.findall(expr):
        for label in _MATCHER.findall(matchers):
            if label not in exported.get(name, set()) | TARGET_LABELS:
                problems.append(f"{where}: {name} has no label {label!r}")
    for name, label in _LABEL_VALUES.findall(expr):
        if label not in exported.get(name, set()) | TARGET_LABELS:
            problems.append(f"{where}: {name} has no label {label!r}")
    grouped = {label.strip() for group in _GROUPING.findall(expr) for label in group.split(",") if label.strip()}
    shown = set(_TEMPLATE_LABEL.findall(text)) - {"value"}
    problems += [f"{where}: no metric it reads has a label {label!r}" for label in sorted((grouped | shown) - known)]
    return problems


def test_the_dashboard_reads_only_exported_metrics_and_labels(exported: dict[str, set[str]]) -> None:
    queries = list(_dashboard_queries())
    assert len(queries) > 20
    problems = [p for where, expr, legend in queries for p in _problems(where, expr, legend, exported)]
    assert not problems, "\n".join(problems)


def test_the_alerts_read_only_exported_metrics_and_labels(exported: dict[str, set[str]]) -> None:
    queries = list(_alert_queries())
    assert len(queries) >= 9
    problems = [p for where, expr, text in queries for p in _problems(where, expr, text, exported)]
    assert not problems, "\n".join(problems)


def test_a_guessed_metric_or_label_is_caught(exported: dict[str, set[str]]) -> None:
    guessed = "rate(inboxd_accepted_total[5m])"
    assert _problems("x", guessed, "", exported) == ["x: inboxd_accepted_total is not exported"]
    assert _problems("x", 'inboxd_dead_letters{tenant="a"}', "", exported) == [
        "x: inboxd_dead_letters has no label 'tenant'"
    ]
    assert _problems("x", "sum by (tenant) (inboxd_claims_total)", "{{tenant}}", exported) == [
        "x: no metric it reads has a label 'tenant'"
    ]


def test_every_alert_names_a_runbook_section_that_exists() -> None:
    headings = re.findall(r"^#+ (.+)$", (ROOT / "docs/operations.md").read_text(), flags=re.MULTILINE)
    anchors = {re.sub(r"[^a-z0-9 _-]", "", h.strip().lower()).replace(" ", "-") for h in headings}
    for group in yaml.safe_load(ALERTS.read_text())["groups"]:
        for rule in group["rules"]:
            url = rule["annotations"]["runbook_url"]
            assert url.startswith("https://github.com/inboxd/inboxd/blob/main/docs/operations.md#"), url
            assert url.partition("#")[2] in anchors, f"{rule['alert']}: no heading for {url}"
