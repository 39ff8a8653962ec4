"""Issue 47's peers on docs/benchmarks.md: pg-boss and graphile-worker beside PgQueuer and Procrastinate.

Each row is inboxd over the best peer of that row, whichever it is, and a peer
that did not run is left out, never guessed. The results are made up in the
shape bench/results/peers.json stores; nothing is measured, and nothing here
needs the Node peers installed.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from bench.node_peers import GRAPHILE_WORKER, PG_BOSS, PeerLoad, jitter_ms
from bench.peer_latency import figure, python_rounds
from bench.peer_targets import best_peer, enqueue_rates, peer_targets
from bench.report_peers import peers as peers_section
from bench.targets import verdict
from tests.unit.test_bench_report import results

SINGLE = "single.c64"
BATCH = "batch100.c16"


def enqueue(value: float, unit: str) -> dict[str, Any]:
    return {"value": value, "unit": unit, "ops": 800, "units": 800, "p50_ms": 2.0, "p99_ms": 9.0, "cpu": None}


def latency(p50: float, p99: float) -> dict[str, Any]:
    return {"value": p99, "unit": "ms", "rounds": 200, "p50_ms": p50, "p99_ms": p99}


def drain(system: str, rate: float) -> dict[str, Any]:
    return {
        "round": 1,
        "system": system,
        "version": "1",
        "jobs": 20_000,
        "enqueue_s": 0.5,
        "drain_s": 20_000 / rate,
        "jobs_per_s": rate,
        "cpu": None,
    }


def peers_run(*, node_peers: bool = True) -> dict[str, Any]:
    """inboxd 1.6x the best single enqueue (pg-boss), 1.1x the best batch (graphile-worker), and so on."""
    single = {"inboxd": 8000.0, "inboxd-python": 3000.0, "pgqueuer": 4000.0, "procrastinate": 2000.0}
    batch = {"inboxd": 55_000.0, "inboxd-python": 30_000.0, "pgqueuer": 40_000.0, "procrastinate": 9000.0}
    waits = {"inboxd": (2.0, 6.0), "inboxd-work": (1.0, 3.0), "pgqueuer": (3.0, 12.0), "procrastinate": (4.0, 20.0)}
    rates = {"inboxd": 9000.0, "inboxd-work": 21_000.0, "PgQueuer": 5000.0, "Procrastinate": 1500.0}
    if node_peers:
        single |= {PG_BOSS: 5000.0, GRAPHILE_WORKER: 1500.0}
        batch |= {PG_BOSS: 30_000.0, GRAPHILE_WORKER: 50_000.0}
        waits |= {PG_BOSS: (250.0, 495.0), GRAPHILE_WORKER: (4.0, 8.0)}
        rates |= {PG_BOSS: 3000.0, GRAPHILE_WORKER: 10_000.0}
    figures = {f"enqueue.{s}.{SINGLE}": enqueue(v, "tx/s") for s, v in single.items()}
    figures |= {f"enqueue.{s}.{BATCH}": enqueue(v, "rows/s") for s, v in batch.items()}
    figures |= {f"latency.{s}": latency(*v) for s, v in waits.items()}
    return {
        "date": "2026-12-07",
        "git": "abc1234",
        "config": {
            "peer_enqueue_callers": [16, 64],
            "batch_rows": 100,
            "batch_clients": 16,
            "peer_jobs": 20_000,
            "claim_workers": 16,
        },
        "versions": {"inboxd": "0.1", "pgqueuer": "1.6.0", "procrastinate": "3.10.0"},
        "node_peer_versions": {PG_BOSS: "10.4.2", GRAPHILE_WORKER: "0.17.3"} if node_peers else {},
        "node_peer_config": {PG_BOSS: "fetch with batchSize 10", GRAPHILE_WORKER: "its local queue"}
        if node_peers
        else {},
        "figures": figures,
        "rounds": [drain(s, r) for s, r in rates.items()],
    }


def rows(peers: dict[str, Any] | None) -> dict[str, tuple[str, str]]:
    bench = results(1.0)
    found = {}
    for t in peer_targets(bench):
        m = t.measure(bench, peers)
        found[t.label.split(" ÷")[0]] = (m.shown if m.value is not None else m.missing, verdict(t, m))
    return found


def test_each_row_is_inboxd_over_the_best_peer_of_that_row_whichever_peer_it_is() -> None:
    found = rows(peers_run())
    assert found["single-event Accept"] == ("1.60x (inboxd 8,000 ÷ pg-boss 5,000 tx/s, 64 callers)", "yes")
    assert found["AcceptBatch of 100"] == (
        "1.10x (inboxd 55,000 ÷ graphile-worker 50,000 rows/s, 16 callers)",
        "**no**",
    )
    assert found["drain (Work streams)"] == ("2.10x (inboxd (Work) 21,000 ÷ graphile-worker 10,000 jobs/s)", "yes")
    # Latency: inboxd's best way (its Work stream) over the lowest p99 of the peers (graphile-worker's 8 ms).
    assert found["enqueue -> a waiting worker starts, p99"] == (
        "0.38x (inboxd (Work) 3.0 ÷ graphile-worker 8.0 ms p99)",
        "yes",
    )


def test_inboxd_s_own_ways_are_never_the_best_peer() -> None:
    values = {"inboxd": 9.0, "inboxd-python": 8.0, "inboxd-work": 7.0, "pgqueuer": 5.0, PG_BOSS: 6.0}
    assert best_peer(values) == (PG_BOSS, 6.0)
    assert best_peer(values, lowest=True) == ("pgqueuer", 5.0)
    assert best_peer({"inboxd": 9.0}) is None


def test_the_drain_s_python_peers_count_as_peers_under_their_own_spelling() -> None:
    # The drain's rounds are named PgQueuer and Procrastinate, as the libraries spell themselves.
    run = peers_run()
    run["rounds"] = [drain("inboxd-work", 21_000.0), drain("PgQueuer", 12_000.0), drain(PG_BOSS, 3000.0)]
    assert rows(run)["drain (Work streams)"] == ("1.75x (inboxd (Work) 21,000 ÷ PgQueuer 12,000 jobs/s)", "**no**")


def test_a_peer_that_did_not_run_is_left_out_never_guessed() -> None:
    run = peers_run()
    del run["figures"][f"enqueue.{PG_BOSS}.{SINGLE}"]
    assert rows(run)["single-event Accept"] == ("2.00x (inboxd 8,000 ÷ PgQueuer 4,000 tx/s, 64 callers)", "yes")
    assert enqueue_rates(peers_run(node_peers=False)["figures"], SINGLE).keys() == {
        "inboxd",
        "inboxd-python",
        "pgqueuer",
        "procrastinate",
    }


def test_without_a_peers_run_every_row_says_how_to_measure_it() -> None:
    for shown, met in rows(None).values():
        assert (shown, met) == ("not measured: run `make bench-peers`", "not measured")


def test_a_run_without_the_node_peers_names_no_best_peer_and_says_why() -> None:
    # The best of two peers is not the best of four: an older run, or one whose Node peers were not installed.
    older = rows(peers_run(node_peers=False))
    assert set(older.values()) == {
        ("not measured: this peers run predates pg-boss and graphile-worker; run `make bench-peers`", "not measured")
    }
    missing = peers_run(node_peers=False) | {"node_peers_missing": "the Node peers are not installed"}
    assert rows(missing)["drain (Work streams)"][0].startswith("not measured: the Node peers are not installed")


def test_the_page_shows_every_row_for_each_peer_with_its_ratio_and_how_it_ran() -> None:
    page = "\n".join(peers_section(peers_run()))
    assert "| shape | inboxd | inboxd (grpc.aio) | PgQueuer | Procrastinate | pg-boss | graphile-worker |" in page
    assert "| one event per call, 64 callers |" in page and "| 1.60x pg-boss |" in page
    assert "| 100 events per call, 16 callers |" in page and "| 1.10x graphile-worker |" in page
    assert "| inboxd-work | 21,000 | 2.10x graphile-worker |" in page
    assert "| pg-boss | 250.0 ms | 495.0 ms | 200 | - |" in page
    assert "| inboxd (Work) | 1.0 ms | 3.0 ms | 200 | 0.38x graphile-worker |" in page
    assert "- pg-boss: fetch with batchSize 10." in page and "- graphile-worker: its local queue." in page
    assert "pg-boss 10.4.2, graphile-worker 0.17.3" in page


def test_the_page_says_why_the_node_peers_did_not_run() -> None:
    run = peers_run(node_peers=False) | {"node_peers_missing": "the Node peers are not installed"}
    page = "\n".join(peers_section(run))
    assert "pg-boss and graphile-worker did not run: the Node peers are not installed." in page
    assert "| pg-boss |" not in page
    older = "\n".join(peers_section(peers_run(node_peers=False)))
    assert "pg-boss and graphile-worker are not in this stored run (it predates them)" in older
    # How they would run is on the page all the same.
    assert "- pg-boss: enqueue with `send`" in older


def test_a_node_peer_s_spec_carries_what_peer_mjs_reads_and_pg_boss_rounds_span_its_polling_interval() -> None:
    spec = PeerLoad(PG_BOSS, "latency", "postgresql://x/db", rounds=10, jitter_ms=jitter_ms(PG_BOSS)).spec()
    assert spec["system"] == PG_BOSS and spec["workload"] == "latency" and spec["rounds"] == 10
    assert "script" not in spec and spec["payload"]
    # pg-boss polls every 0.5 s: its rounds start anywhere in that interval; a LISTENing worker needs no spread.
    assert jitter_ms(PG_BOSS) >= 500 > jitter_ms(GRAPHILE_WORKER)


def test_a_latency_figure_is_its_p99_in_ms_with_the_p50_beside_it() -> None:
    fig = figure([0.001 * n for n in range(1, 101)], worker="w")
    assert fig["value"] == fig["p99_ms"] == pytest.approx(99.0, abs=0.5)
    assert (fig["p50_ms"], fig["rounds"], fig["unit"]) == (pytest.approx(50.0, abs=0.6), 100, "ms")
    assert fig["worker"] == "w"


def test_a_latency_round_times_from_the_enqueue_call_and_refuses_a_job_started_before_it() -> None:
    async def rounds(early: bool) -> list[float]:
        started: asyncio.Queue[float] = asyncio.Queue()
        if early:
            started.put_nowait(0.0)

        async def enqueue() -> None:
            # The worker starts the job 5 ms after the enqueue is called.
            asyncio.get_running_loop().call_later(0.005, lambda: started.put_nowait(time.perf_counter()))

        return await python_rounds(enqueue, started, 3)

    found = asyncio.run(rounds(early=False))
    assert len(found) == 3 and all(0.004 <= s < 5.0 for s in found)
    with pytest.raises(RuntimeError, match="before anything was enqueued"):
        asyncio.run(rounds(early=True))
