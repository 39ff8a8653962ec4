"""Issue 44's benchmark: the deliveries it signs (checked by the edge's own loader and verifier), how the generator
frames answers, the window order, an edge's processes folded into one CPU part, and the rows on the page.

Made-up windows and results in the shape bench/results/*.json store; nothing is measured here.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from bench.edge_procs import SECRET, SECRET_ENV, routes_file
from bench.edge_requests import BODY_BYTES, PATH, ResponseError, signed_requests, split_response
from bench.edge_targets import edge_targets
from bench.phases.edge import BARE, ONE, TWO, combine, figure_name, folded, order
from bench.report_edge import edge
from bench.targets import verdict
from inboxd_edge.config import load_config
from inboxd_edge.signatures import SignatureError


def parsed(request: bytes) -> tuple[str, dict[str, str], bytes]:
    head, _, body = request.partition(b"\r\n\r\n")
    line, *fields = head.decode().split("\r\n")
    return line, dict(f.split(": ", 1) for f in fields), body


def test_every_delivery_is_its_own_kib_of_json_that_the_edges_github_route_verifies(tmp_path: Path) -> None:
    requests = signed_requests("127.0.0.1:8081", SECRET, "run1-edge-workers1-0", 50)
    bodies = [parsed(r)[2] for r in requests]
    assert {len(b) for b in bodies} == {BODY_BYTES}
    assert len(set(bodies)) == len(bodies), "two deliveries share a body, so a key: the second is a DUPLICATE"
    assert all(json.loads(b)["repository"]["full_name"] == "acme/app" for b in bodies)

    config = tmp_path / "routes.toml"
    config.write_text(routes_file("127.0.0.1:50051"))
    (route,) = load_config(config, {SECRET_ENV: SECRET}).routes
    assert route.path == PATH and route.scheme == "github"
    verifier = route.verifier_for({})
    assert verifier is not None
    for request in requests[:3]:
        line, headers, body = parsed(request)
        assert line == f"POST {PATH} HTTP/1.1"
        assert int(headers["Content-Length"]) == len(body)
        verifier.verify(body, headers, time.time())
        with pytest.raises(SignatureError):
            verifier.verify(body.replace(b'"ref"', b'"reF"'), headers, time.time())


def test_answers_are_framed_by_content_length_and_an_unframed_one_is_refused() -> None:
    one = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 23\r\n\r\n{"outcome": "accepted"}'
    two = b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 2\r\nServer: x\r\n\r\n{}"
    assert split_response(one[:40]) is None
    assert split_response(one[:-1]) is None
    first = split_response(one + two)
    assert first is not None and (first.status, first.body, first.size) == (200, b'{"outcome": "accepted"}', len(one))
    second = split_response((one + two)[first.size :])
    assert second is not None and (second.status, second.body) == (401, b"{}")
    with pytest.raises(ResponseError, match="Content-Length"):
        split_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
    with pytest.raises(ResponseError, match="HTTP/1"):
        split_response(b"SSH-2.0-OpenSSH\r\n\r\n")


def test_windows_alternate_a_b_c_c_b_a_so_each_system_meets_early_and_late_moments_alike() -> None:
    assert order(1) == [BARE, ONE, TWO, TWO, ONE, BARE]
    assert order(2) == order(1) * 2
    mean = {s: sum(i for i, o in enumerate(order(1)) if o == s) for s in (BARE, ONE, TWO)}
    assert len(set(mean.values())) == 1


def test_an_edges_processes_fold_into_one_part_and_stay_apart_beside_it() -> None:
    cpu = {"seconds": 10.0, "used": {"edge.parent": 0.1, "edge.worker1": 4.0, "edge.worker2": 3.5, "server": 3.0}}
    whole, split = folded(cpu)
    assert whole == {"seconds": 10.0, "used": {"server": 3.0, "edge": 7.6}}
    assert split == {"parent": 0.1, "worker1": 4.0, "worker2": 3.5}
    assert folded({"seconds": 1.0, "used": {"edge": 0.7}}) == ({"seconds": 1.0, "used": {"edge": 0.7}}, {})
    assert folded(None) == (None, {})


def window(system: str, value: float, *, edge_s: float, workers: dict[str, float] | None = None) -> dict[str, Any]:
    seconds = 10.0
    ops = round(value * seconds)
    part = "bare" if system == BARE else "edge"
    used = {part: edge_s, "server": 0.0 if system == BARE else ops * 250e-6, "postgres": ops * 80e-6}
    return {
        "value": value,
        "unit": "req/s",
        "ops": ops,
        "units": ops,
        "seconds": seconds,
        "p50_ms": 10.0,
        "p99_ms": 40.0,
        "errors": 0,
        "first_error": "",
        "cpu": {"seconds": seconds, "used": {**used, "loadgen": ops * 20e-6, "other": 1.0}},
        "edge_processes": workers or {},
        "generator": "python",
        "generator_cpu_us_per_op": 20.0,
        "repeated": 5 if system == BARE else 0,
        "sent": ops + 1000,
    }


def run_results(edge_rate: float, *, failed: str | None = None) -> dict[str, Any]:
    two = {"parent": 0.05, "worker1": 4.5, "worker2": 3.5}
    systems = {
        BARE: [window(BARE, 12_000.0, edge_s=7.0), window(BARE, 10_000.0, edge_s=7.0)],
        ONE: [window(ONE, edge_rate, edge_s=8.0), window(ONE, edge_rate, edge_s=8.0)],
        TWO: [window(TWO, edge_rate * 1.3, edge_s=8.05, workers=two)] * 2,
    }
    figures = {figure_name(s): combine(ws, s, 1) for s, ws in systems.items()}
    bench: dict[str, Any] = {
        "config": {"edge_rounds": 1, "edge_connections": 64},
        "machine": {"nproc": 2},
        "figures": {} if failed else figures,
        "edge": {
            "route": {"scheme": "github", "path": PATH, "namespace": "bench/edge", "body_bytes": BODY_BYTES},
            "connections": 64,
            "deliveries_per_window": 150_000,
            "window_s": 10.0,
            "warmup_s": 2.0,
            "stored_events": 120_400,
            "profile": {
                "workload": "the edge",
                "samples": 2000,
                "rate": 200,
                "seconds": 10.0,
                "parts": {"grpc": 40.0, "aiohttp": 30.0, "inboxd_edge": 30.0},
                "own": [{"function": "_write", "file": "grpc/aio/_call.py", "percent": 24.0}],
                "inclusive": [],
            },
        },
    }
    if failed:
        bench["failed_phases"] = {"edge": failed}
    return bench


def test_the_edge_over_the_bare_app_has_its_bar_and_the_other_two_rows_are_measured_and_explained() -> None:
    bench = run_results(2_000.0)
    over_bare, workers, per_delivery = edge_targets(bench)
    m = over_bare.measure(bench, None)
    assert m.value == pytest.approx(2_000.0 / 11_000.0)
    assert verdict(over_bare, m) == "**no**"
    assert verdict(over_bare, over_bare.measure(run_results(6_000.0), None)) == "yes"

    w = workers.measure(bench, None)
    assert w.value == pytest.approx(1.3)
    assert "edge 81% (worker1 45%, worker2 35%, parent 0%)" in w.shown, w.shown

    cpu = per_delivery.measure(bench, None)
    # 8 s of edge CPU over 20,000 deliveries in each of two windows.
    assert cpu.value == pytest.approx(400.0)
    assert "inboxd 250 µs" in cpu.shown and "grpc 40%" in cpu.shown


def test_a_failed_phase_leaves_every_edge_row_unmeasured_with_its_reason() -> None:
    bench = run_results(2_000.0, failed="RuntimeError: edge --workers 2 did not start")
    for target in edge_targets(bench):
        m = target.measure(bench, None)
        assert m.value is None and "did not start" in m.missing
    assert any("did not start" in line for line in edge(bench))


def test_the_page_shows_each_systems_windows_the_worker_split_the_headroom_and_the_profile() -> None:
    lines = edge(run_results(2_000.0))
    text = "\n".join(lines)
    assert [line.split("|")[1].strip() for line in lines if line.startswith("| `edge.")] == [
        "`edge.bare`",
        "`edge.workers1`",
        "`edge.workers2`",
    ]
    assert "edge 400 µs, inboxd 250 µs, PostgreSQL 80 µs, generator 20 µs" in text
    assert "worker1 45%, worker2 35%, parent 0%" in text
    assert "11,000 req/s, 5.5x the one-process edge's 2,000 req/s" in text
    # Two windows of each edge: 20,000 + 1,000 sent by one process, 26,000 + 1,000 by --workers 2, none twice.
    assert "held 120,400 events in the edges' namespace, for 96,000 distinct deliveries" in text
    assert "| grpc | 40.0% |" in text and "`_write` (grpc/aio/_call.py)" in text
    assert edge({"config": {}, "figures": {}}) == []
