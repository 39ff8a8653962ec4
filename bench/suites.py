"""The order of each command's phases, and where its results go."""

from __future__ import annotations

import json
import logging
import platform
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench import support
from bench.config import Config
from bench.phases.accept import accept_phase
from bench.phases.bulk import bulk_phase
from bench.phases.claim import claim_phase
from bench.phases.edge import edge_phase
from bench.phases.fanout import fanout_phase
from bench.phases.flow import flow_phase
from bench.phases.history import history_phase
from bench.phases.idle import backlog_phase, long_poll_phase, wakeup_phase
from bench.phases.idle_streams import idle_streams_phase
from bench.phases.profiling import ACCEPT, ACCEPT_BATCH, ACCEPT_STREAM, CLAIM10, WORK, profile_phase
from bench.phases.scaling import workers_phase
from bench.phases.startup import startup_phase
from bench.phases.streams import streams_phase
from bench.phases.tracing import tracing_phase
from bench.phases.work import recovery_phase, work_claim_phase, work_wakeup_phase
from bench.run import Run

log = logging.getLogger("bench")

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
# --quick runs prove the harness works; they never overwrite what the page is made from.
QUICK_RESULTS = RESULTS / "quick"

Phase = Callable[[Run], Awaitable[None]]
# Results of an older harness (other figure names, other targets) are not rendered.
FORMAT = 2


def results_dir(config: Config) -> Path:
    """Where a run's results go: a smoke run's or a partial run's never replace the published ones."""
    return QUICK_RESULTS if config.quick or config.only else RESULTS


async def _run(config: Config, kind: str, phases: list[tuple[str, Phase]], *versions: str) -> dict[str, Any]:
    unknown = set(config.only) - {name for name, _ in phases}
    if unknown:
        raise SystemExit(f"no such phase: {', '.join(sorted(unknown))}; {kind} has {', '.join(n for n, _ in phases)}")
    run = Run(config)
    await run.start()
    try:
        facts = await run.facts(*versions)
        for name, phase in phases:
            if config.only and name not in config.only:
                continue
            log.info("-- %s --", name)
            try:
                await phase(run)
            except Exception as exc:
                # One broken phase leaves its own figures unmeasured (the page says which), not the run lost.
                log.exception("phase %s failed", name)
                run.extra.setdefault("failed_phases", {})[name] = f"{type(exc).__name__}: {exc}"[:1000]
    finally:
        await run.stop()
    return {
        "kind": kind,
        "format": FORMAT,
        **facts,
        "python": platform.python_version(),
        "support": run.support,
        "figures": run.figures,
        **run.extra,
    }


async def run_bench(config: Config) -> dict[str, Any]:
    folder = results_dir(config) / "profiles"

    async def accept_profiles(run: Run) -> None:
        await profile_phase(run, (ACCEPT, ACCEPT_BATCH), folder)

    async def claim_profile(run: Run) -> None:
        await profile_phase(run, (CLAIM10,), folder)

    async def edge(run: Run) -> None:
        await edge_phase(run, folder)

    async def stream_profiles(run: Run) -> None:
        if support.lacks(run.support, support.WORK) is None:
            await profile_phase(run, (ACCEPT_STREAM, WORK), folder)

    return await _run(
        config,
        "bench",
        [
            ("accept", accept_phase),
            ("accept-profiles", accept_profiles),
            ("streams", streams_phase),
            ("fanout", fanout_phase),
            ("claim", claim_phase),
            ("claim-profile", claim_profile),
            ("work", work_claim_phase),
            ("stream-profiles", stream_profiles),
            ("recovery", recovery_phase),
            ("startup", startup_phase),
            ("backlog", backlog_phase),
            ("wakeup", wakeup_phase),
            ("work-wakeup", work_wakeup_phase),
            ("longpolls", long_poll_phase),
            ("idle-streams", idle_streams_phase),
            ("workers", workers_phase),
            ("flow", flow_phase),
            ("history", history_phase),
            ("bulk", bulk_phase),
            ("tracing", tracing_phase),
            ("edge", edge),
        ],
    )


async def run_profiles(config: Config) -> dict[str, Any]:
    """Only the profiles, against whatever server this checkout has: the "before" of a change."""

    async def profiles(run: Run) -> None:
        await profile_phase(run, (ACCEPT, ACCEPT_BATCH, CLAIM10), results_dir(config) / "profiles-before")

    return await _run(config, "profiles", [("profiles", profiles)])


async def run_peers(config: Config) -> dict[str, Any]:
    from bench.peer_suite import peer_phases

    return await _run(config, "peers", peer_phases(), "pgqueuer", "procrastinate")


def save(results: dict[str, Any], config: Config, name: str) -> Path:
    folder = results_dir(config)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    return path


def load(name: str, folder: Path = RESULTS) -> dict[str, Any] | None:
    path = folder / f"{name}.json"
    if not path.exists():
        return None
    found: dict[str, Any] = json.loads(path.read_text())
    return found if found.get("format") == FORMAT else None
