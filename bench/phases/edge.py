"""The edge (issue 44): signed deliveries through `inboxd-edge` into inboxd, beside a bare aiohttp app.

Three systems, each started once and kept for the phase: A, the bare app
(bench/bare_app.py: reads the body, answers 200); B, the edge as one process;
C, the edge with `--workers 2`. Both edges forward to the run's inboxd server
(one process) over its default AcceptStreams. Windows run A B C C B A
(`edge_rounds` times), so each meets early and late moments of the run alike.
Every window is a fresh run of one generator (bench/edge_loadgen.py, a
process of its own): `edge_deliveries` GitHub push deliveries, each its own
event, 1 KiB of JSON, signed with HMAC-SHA256 before the window, replayed on
`edge_connections` keep-alive connections. The CPU of every process is read
from /proc at the window's two ends: the edge's (each worker apart under
`--workers 2`), inboxd's, PostgreSQL's, the generator's. Then py-spy records
the one-process edge under the same load, in a window of its own.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, LiteralString

import psycopg

from bench.cluster import checkpoint, execute
from bench.edge_procs import NAMESPACE, READY_SECONDS, HttpLoad, HttpResult, Served, bare_app, edge, run_http
from bench.edge_requests import BODY_BYTES, PATH
from bench.profiles import profile_during
from bench.record import combined
from bench.run import Run
from bench.workload import CLEAR_EVENTS, RUN_ID

log = logging.getLogger("bench")

BARE, ONE, TWO = "bare", "workers1", "workers2"
SYSTEMS = (BARE, ONE, TWO)
# The probe's names for the processes under test (an edge's workers: "edge.worker1" ...).
PART = {BARE: "bare", ONE: "edge", TWO: "edge"}
UNIT = "req/s"
# run.extra's key for what the phase found besides its figures: the set-up and the profile.
EXTRA = "edge"
PROFILE = "edge"

STORED: LiteralString = "SELECT count(*) FROM inbox_events WHERE namespace = %(namespace)s"

# The edge's profile groups its samples by these parts (bench/profiles.py's are the server's).
EDGE_PARTS = (
    ("inboxd_edge", ("inboxd_edge/",)),
    ("inboxd_client", ("inboxd_client/", "inboxd/v1/")),
    ("aiohttp", ("aiohttp/", "multidict/", "yarl/", "propcache/")),
    ("grpc", ("grpc/", "google/protobuf/")),
    ("hmac/hashlib", ("hmac.py", "hashlib.py")),
    ("json", ("json/",)),
    ("logging", ("logging/",)),
    ("opentelemetry", ("opentelemetry/",)),
    ("prometheus_client", ("prometheus_client/",)),
    ("asyncio", ("asyncio/", "selectors.py")),
)


def figure_name(system: str) -> str:
    return f"edge.{system}"


NAMES = tuple(figure_name(s) for s in SYSTEMS)


def order(rounds: int) -> list[str]:
    """A B C C B A, `rounds` times over."""
    return [*SYSTEMS, *reversed(SYSTEMS)] * rounds


def folded(cpu: dict[str, Any] | None) -> tuple[dict[str, Any] | None, dict[str, float]]:
    """The window's CPU with an edge's processes ("edge.parent", "edge.worker1" ...) summed as "edge", and them apart.

    The probe watched them apart (overlapping parts would skew its "other"); the page wants the edge whole,
    and beside it each process's share.
    """
    if cpu is None:
        return None, {}
    used = dict(cpu["used"])
    split = {k.split(".", 1)[1]: float(used.pop(k)) for k in sorted(used) if k.startswith("edge.")}
    if split:
        used["edge"] = round(sum(split.values()), 3)
    return {**cpu, "used": used}, split


def from_http(result: HttpResult, position: int) -> dict[str, Any]:
    """One window as a figure, in the fields record.from_node gives (so record.combined adds them up)."""
    r = result.report
    seconds = float(r["seconds"])
    cpu, split = folded(result.cpu.to_json() if result.cpu else None)
    return {
        "value": round(r["ops"] / seconds, 1) if seconds > 0 else 0.0,
        "unit": UNIT,
        "ops": int(r["ops"]),
        "units": int(r["ops"]),
        "seconds": round(seconds, 3),
        "p50_ms": round(float(r["p50_ms"]), 3),
        "p90_ms": round(float(r["p90_ms"]), 3),
        "p99_ms": round(float(r["p99_ms"]), 3),
        "errors": int(r["errors"]),
        "first_error": r["first_error"],
        "cpu": cpu,
        "edge_processes": split,
        "generator": f"python asyncio.Protocol on {r['loop']} ({r['connections']} keep-alive connections)",
        "generator_cpu_us_per_op": round(float(r["cpu_us_per_op"]), 1) if r.get("cpu_us_per_op") else None,
        "repeated": int(r["repeated"]),
        "sent": int(r["sent"]),
        "position": position,
    }


def combine(windows: list[dict[str, Any]], system: str, rounds: int) -> dict[str, Any]:
    """A system's windows as one figure: record.combined, and the generator's CPU and repeats over them all."""
    fig = combined(windows)
    ops = sum(int(w["ops"]) for w in windows)
    spent = sum(float(w["generator_cpu_us_per_op"] or 0.0) * int(w["ops"]) for w in windows)
    fig["generator_cpu_us_per_op"] = round(spent / ops, 1) if ops else None
    fig["repeated"] = sum(int(w["repeated"]) for w in windows)
    # Every request sent, warm-up and the window's last answers included: what an edge's inboxd must hold.
    fig["sent"] = sum(int(w.get("sent", 0)) for w in windows)
    split: dict[str, float] = {}
    for w in windows:
        for name, seconds in w.get("edge_processes", {}).items():
            split[name] = round(split.get(name, 0.0) + seconds, 3)
    fig["edge_processes"] = split
    fig["order"] = "".join("ABC"[SYSTEMS.index(s)] for s in order(rounds))
    fig["system"] = system
    fig["edge_workers"] = {BARE: 0, ONE: 1, TWO: 2}[system]
    return fig


async def edge_phase(run: Run, profiles: Path) -> None:
    c = run.config
    logs = run.cluster.folder
    run.extra[EXTRA] = {
        "route": {"scheme": "github", "path": PATH, "namespace": NAMESPACE, "body_bytes": BODY_BYTES},
        "connections": c.edge_connections,
        "deliveries_per_window": c.edge_deliveries,
        "window_s": c.duration,
        "warmup_s": c.warmup,
    }
    await execute(run.url, CLEAR_EVENTS)
    try:
        async with bare_app(logs) as bare, edge(logs, run.target, 1) as one, edge(logs, run.target, 2) as two:
            served = {BARE: bare, ONE: one, TWO: two}
            run.extra[EXTRA]["workers2_processes"] = len(two.serving_pids())
            await windows(run, served)
            run.extra[EXTRA]["stored_events"] = await stored(run.url)
            await profile(run, one, profiles)
    finally:
        await execute(run.url, CLEAR_EVENTS)


async def windows(run: Run, served: dict[str, Served]) -> None:
    c = run.config
    found: dict[str, list[dict[str, Any]]] = {s: [] for s in SYSTEMS}
    for position, system in enumerate(order(c.edge_rounds)):
        await checkpoint(run.url)
        target = served[system]
        load = HttpLoad(
            target.port,
            c.edge_connections,
            c.warmup,
            c.duration,
            c.edge_deliveries,
            f"{RUN_ID}-edge-{system}-{position}",
        )
        result = await run_http(load, run.probe, target.cpu_parts(PART[system]))
        fig = from_http(result, position)
        found[system].append(fig)
        log.info(
            "edge %-8s window %d: %8.1f %s, p99 %6.1f ms, %s%s",
            system,
            position + 1,
            fig["value"],
            UNIT,
            fig["p99_ms"],
            _cpu_text(fig),
            f"  {fig['errors']} errors, first: {fig['first_error']}" if fig["errors"] else "",
        )
    for system, figs in found.items():
        run.figures[figure_name(system)] = combine(figs, system, c.edge_rounds)


async def stored(url: str) -> int:
    """Events inboxd holds in the edge's namespace: one per distinct delivery an edge was sent, if all went in."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(STORED, {"namespace": NAMESPACE})
        row = await cur.fetchone()
    return int(row[0]) if row else 0


def _cpu_text(fig: dict[str, Any]) -> str:
    cpu = fig.get("cpu") or {}
    seconds = cpu.get("seconds") or 0.0
    used = cpu.get("used", {})
    return ", ".join(f"{k} {100 * v / seconds:.0f}%" for k, v in sorted(used.items()) if seconds) or "no cpu"


async def profile(run: Run, target: Served, folder: Path) -> None:
    """py-spy on the one-process edge under the windows' load, in a window of its own; its summary in run.extra."""
    c = run.config
    label = f"the edge (one process), {c.edge_connections} connections of signed GitHub deliveries"
    load = HttpLoad(
        target.port, c.edge_connections, 0.5, c.profile_seconds + 1.5, c.edge_deliveries, f"{RUN_ID}-edge-profile"
    )
    # The generator signs its deliveries first: py-spy starts once they are on the wire, not before.
    started = asyncio.Event()
    running = asyncio.create_task(run_http(load, None, started=started))
    waiting = asyncio.create_task(started.wait())
    try:
        await asyncio.wait({running, waiting}, timeout=READY_SECONDS, return_when=asyncio.FIRST_COMPLETED)
        if not started.is_set():
            if running.done():
                await running  # the generator's own error
            raise RuntimeError(f"the generator put no load on the edge within {READY_SECONDS:.0f} s")
        log.info("profiling %s for %.0f s", label, c.profile_seconds)

        async def busy() -> None:
            await running

        summary = await profile_during(
            target.pid, busy, c.profile_seconds, c.profile_rate, folder / f"{PROFILE}.txt", by_part=EDGE_PARTS
        )
    except RuntimeError as exc:
        # py-spy needs ptrace (root, or kernel.yama.ptrace_scope 0): the figures stand without it.
        log.warning("no profile of %s: %s", label, exc)
        run.extra[EXTRA]["profile"] = {"workload": label, "error": str(exc)}
        return
    finally:
        for task in (waiting, running):
            task.cancel()
    run.extra[EXTRA]["profile"] = {"workload": label, **summary}
