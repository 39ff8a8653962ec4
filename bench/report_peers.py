"""docs/benchmarks.md's section beside the peers: enqueue, drain and latency, each row against the best peer."""

from __future__ import annotations

from typing import Any

from bench.figures import Figures, cpu_line, peer_rates, per_unit_line, shown_value
from bench.node_peers import HOW
from bench.peer_targets import LABELS, best_peer, enqueue_rates, label, latency_p99s
from bench.run import NOISY_PERCENT

ENQUEUE_SYSTEMS = ("inboxd", "inboxd-python", "pgqueuer", "procrastinate", "pg-boss", "graphile-worker")
# How the Python peers are configured; the Node peers' own words come with their results (node_peers.HOW).
PYTHON_HOW = {
    "pgqueuer": (
        "enqueue with `Queries.enqueue` (one job, or lists of many in one statement), one psycopg connection per "
        "caller (asyncpg measured no clear difference there); the drain is 16 QueueManagers, one asyncpg "
        "connection each, run(batch_size=10, mode=drain), completions through its own batching log buffer; "
        "latency: one QueueManager of batch 1 on asyncpg (it LISTENs). asyncpg is its first driver, and its "
        "fastest where it waits: on psycopg its LISTEN watcher holds the connection for up to its 1 s timeout "
        "and the dequeue a NOTIFY starts waits behind it (measured: a drain at under half the rate, and a "
        "wake-up of 1 to 2 s every other round)"
    ),
    "procrastinate": (
        "enqueue with `defer_async` and `batch_defer_async`, a pool of one connection per caller; the drain is "
        "16 workers of concurrency 10 sharing a pool of 20 connections (it fetches one job per query, the only "
        "way it can: shown its own way); latency: a worker of concurrency 1 with listen_notify"
    ),
}


def ratio_cell(value: float | None, best: tuple[str, float] | None, *, lowest: bool = False) -> str:
    """inboxd's figure over the best peer's, named: `1.52x PgQueuer`; '-' when either is missing."""
    if value is None or best is None or not best[1]:
        return "-"
    return f"{value / best[1]:.2f}x {label(best[0])}"


def peers(peers: dict[str, Any] | None) -> list[str]:
    out = ["## Beside PgQueuer, Procrastinate, pg-boss and graphile-worker", ""]
    if peers is None:
        return [*out, "No `make bench-peers` results yet.", ""]
    figs: Figures = peers["figures"]
    v = {**peers["versions"], **peers.get("node_peer_versions", {})}
    for name, error in peers.get("failed_phases", {}).items():
        out += [f"Phase `{name}` failed, so its figures are not measured: `{error}`", ""]
    if peers.get("node_peers_missing"):
        out += [f"pg-boss and graphile-worker did not run: {peers['node_peers_missing']}.", ""]
    elif not peers.get("node_peer_versions"):
        out += [
            "pg-boss and graphile-worker are not in this stored run (it predates them): `make bench-peers` adds them.",
            "",
        ]
    out += [
        f"Run of {peers['date']} at commit {peers['git']}, same durable PostgreSQL, every queue table LOGGED, "
        "the same payload and the same number of callers or workers for every system. Versions: "
        + ", ".join(
            f"{LABELS.get(k, k)} {v.get(k, '-')}" for k in ("inboxd", *PYTHON_HOW, "pg-boss", "graphile-worker")
        )
        + ".",
        "",
        *configuration(peers),
        *enqueue_table(peers),
        *drain_table(peers),
        *latency_table(figs),
    ]
    return out


def configuration(peers: dict[str, Any]) -> list[str]:
    """How each peer was configured, and why that is its best (its own fastest documented way)."""
    # The run's own words for the Node peers when it stored them; this checkout's for a run without them.
    how = {**PYTHON_HOW, **HOW, **peers.get("node_peer_config", {})}
    out = [
        "### How each peer runs",
        "",
        "Each peer is used its own fastest documented way: its batch enqueue for batches, its batched fetch "
        "(or its own concurrency where it has no batch) for the drain, and for latency its own waiting worker "
        "(LISTEN where it ships it). The Python peers run in this process (uvloop); the Node peers each in a "
        "Node process of their own (`bench/peers-node/peer.mjs`, pinned in its package-lock.json), as their "
        "users run them. pg-boss 10 and graphile-worker 0.17 are the newest releases that run on Node 20 "
        "(pg-boss 11+ and graphile-worker 0.18 need Node 22).",
        "",
    ]
    out += [f"- {label(name)}: {text}." for name, text in how.items()]
    return [*out, ""]


def enqueue_table(peers: dict[str, Any]) -> list[str]:
    figs: Figures = peers["figures"]
    systems = [s for s in ENQUEUE_SYSTEMS if any(n.startswith(f"enqueue.{s}.") for n in figs)]
    out = [
        "### Enqueue",
        "",
        "inboxd is shown twice: driven by the Node generator, and by grpc.aio callers in Python, the same "
        "generator class as the Python peers. The last column is inboxd (Node) over the best peer of the row.",
        "",
        "| shape | " + " | ".join(LABELS[s] for s in systems) + " | inboxd ÷ best peer |",
        "|---|" + "---|" * (len(systems) + 1),
    ]
    shapes = sorted({name.split(".", 2)[2] for name in figs if name.startswith("enqueue.")}, key=_shape_order)
    for shape in shapes:
        cells = []
        for system in systems:
            fig = figs.get(f"enqueue.{system}.{shape}")
            cells.append(f"{shown_value(fig)} (p99 {fig['p99_ms']:.1f} ms)" if fig else "-")
        rates = enqueue_rates(figs, shape)
        cells.append(ratio_cell(rates.get("inboxd"), best_peer(rates)))
        out.append(f"| {_shape_label(shape)} | {' | '.join(cells)} |")
    out += ["", "| figure | CPU (% of a core) | CPU per unit |", "|---|---|---|"]
    for name, fig in figs.items():
        if name.startswith("enqueue."):
            out.append(f"| `{name}` | {cpu_line(fig)} | {per_unit_line(fig)} |")
    return [*out, ""]


def drain_table(peers: dict[str, Any]) -> list[str]:
    cfg = peers["config"]
    # Older results did not record which calls inboxd's claimers made: then the page does not guess.
    drain = f": {peers['inboxd_drain']}" if "inboxd_drain" in peers else ""
    drain += f"; inboxd-work's: {peers['inboxd_work_drain']}" if "inboxd_work_drain" in peers else ""
    rates = peer_rates(peers)
    best = best_peer(rates)
    out = [
        "### Drain",
        "",
        f"Each round enqueues {cfg['peer_jobs']:,} no-op jobs with the library's batch enqueue, then "
        f"{cfg['claim_workers']} concurrent claimers drain them; jobs/s is jobs ÷ drain time. inboxd's claimers are "
        f"grpc.aio loops in this process{drain}. A Node peer's drain is timed in its process, from its workers' "
        "start to the last completion committed.",
        "",
        "| system | jobs/s (mean) | ÷ best peer | rounds | enqueue | CPU in the last drain (% of a core) |",
        "|---|---|---|---|---|---|",
    ]
    for system, rate in rates.items():
        rounds = [r for r in peers.get("rounds", []) if r["system"] == system]
        each = ", ".join(f"{r['jobs_per_s']:,.0f}" for r in rounds)
        enqueue = ", ".join(f"{r['enqueue_s']:.1f} s" for r in rounds)
        last = rounds[-1]
        mine = ratio_cell(rate, best) if system.startswith("inboxd") else "-"
        out.append(
            f"| {system} | {rate:,.0f} | {mine} | {each} | {enqueue} | {cpu_line(last) if last.get('cpu') else '-'} |"
        )
    noisy = [
        f"{r['system']} round {r['round']} ({share:.0f}%)"
        for r in peers.get("rounds", [])
        if r.get("cpu") and (share := 100 * r["cpu"]["used"].get("other", 0.0) / r["cpu"]["seconds"]) >= NOISY_PERCENT
    ]
    if noisy:
        out += ["", f"Rounds in which other processes took {NOISY_PERCENT:.0f}% of a core or more: {', '.join(noisy)}."]
    return [*out, ""]


def latency_table(figs: Figures) -> list[str]:
    p99s = latency_p99s(figs)
    if not p99s:
        return []
    best = best_peer(p99s, lowest=True)
    out = [
        "### Enqueue -> a waiting worker starts",
        "",
        "On an idle queue, rounds of one job: from the enqueue call to the moment a worker that was waiting "
        "starts it (its handler runs; for inboxd, the waiting Claim answers or the Work stream is pushed it). "
        "From the call, not its answer: a worker woken by NOTIFY in the producer's process can start the job "
        "before the producer reads the answer (graphile-worker did), so the commit's flush is in every figure. "
        "A short varying pause before each round (for pg-boss, which polls, spread over its whole interval); "
        "5 rounds first, unmeasured.",
        "",
        "| system | p50 | p99 | rounds | p99 ÷ best peer's |",
        "|---|---|---|---|---|",
    ]
    for name, fig in figs.items():
        if not name.startswith("latency."):
            continue
        system = name.removeprefix("latency.")
        mine = ratio_cell(float(fig["p99_ms"]), best, lowest=True) if system.startswith("inboxd") else "-"
        out.append(f"| {label(system)} | {fig['p50_ms']:.1f} ms | {fig['p99_ms']:.1f} ms | {fig['rounds']} | {mine} |")
    return [*out, ""]


def _shape_order(shape: str) -> tuple[bool, int]:
    kind, _, callers = shape.partition(".c")
    return (kind != "single", int(callers) if callers.isdigit() else 0)


def _shape_label(shape: str) -> str:
    kind, _, callers = shape.partition(".c")
    what = "one event per call" if kind == "single" else f"{kind.removeprefix('batch')} events per call"
    return f"{what}, {callers} callers"
