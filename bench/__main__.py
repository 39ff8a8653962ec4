"""`python -m bench run | peers | profile | report`: see the package docstring."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import time
from collections.abc import Coroutine
from dataclasses import replace
from typing import Any

# Before grpc is imported: starting the server subprocess while grpc threads
# run would otherwise log fork-handler warnings (the child execs at once).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from bench.config import Config
from bench.suites import run_bench, run_peers, run_profiles, save

COMMANDS = {
    "run": "inboxd against raw PostgreSQL, with profiles (make bench)",
    "peers": "inboxd beside PgQueuer, Procrastinate, pg-boss and graphile-worker (make bench-peers)",
    "profile": "only the server profiles, saved as the 'before' of a change (bench/results/profiles-before.json)",
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description="inboxd's benchmarks (never run in CI)")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in COMMANDS.items():
        cmd = commands.add_parser(name, help=text)
        cmd.add_argument(
            "--quick", action="store_true", help="a smoke run of about a minute; results go to bench/results/quick/"
        )
        cmd.add_argument("--duration", type=float, help="seconds per measurement window")
        cmd.add_argument(
            "--only", help="comma-separated phases to run (e.g. claim,workers); results go to bench/results/quick/"
        )
        cmd.add_argument("--history-rows", type=int, help="COMPLETED rows for the history phase (default 5M)")
        cmd.add_argument("--peer-jobs", type=int, help="jobs per peer round")
        cmd.add_argument(
            "--transport",
            choices=("h2", "grpc-js"),
            default="h2",
            help="the Node generator's transport (default h2: hand-framed gRPC on node:http2)",
        )
        cmd.add_argument(
            "--loop",
            choices=("asyncio", "uvloop"),
            default="uvloop",
            help="this process's event loop (raw baseline, peers, grpc.aio); the server runs its own default",
        )
    report = commands.add_parser("report", help="rewrite docs/benchmarks.md and .png from bench/results/*.json")
    report.add_argument(
        "--quick", action="store_true", help="from bench/results/quick/ into bench/results/quick/; docs/ untouched"
    )
    return parser


def _config(args: argparse.Namespace) -> Config:
    config = Config.smoke() if args.quick else Config()
    changes: dict[str, Any] = {"loop": args.loop, "transport": args.transport}
    if args.duration is not None:
        changes["duration"] = args.duration
    if args.history_rows is not None:
        changes["history_rows"] = args.history_rows
    if args.peer_jobs is not None:
        if args.peer_jobs <= 0 or args.peer_jobs % 100:
            raise SystemExit("--peer-jobs: a positive multiple of 100 (inboxd enqueues them 100 per AcceptBatch)")
        changes["peer_jobs"] = args.peer_jobs
    if args.only:
        changes["only"] = tuple(p.strip() for p in args.only.split(",") if p.strip())
    return replace(config, **changes)


def _run(main: Coroutine[Any, Any, dict[str, Any]], loop: str) -> dict[str, Any]:
    if loop == "uvloop":
        import uvloop

        return uvloop.run(main)
    return asyncio.run(main)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    # The peers log every job at INFO; only our own lines are worth reading here.
    for noisy in ("pgqueuer", "procrastinate"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    from bench.report import console_summary, write_docs

    if args.command == "report":
        if args.quick:
            print(console_summary(quick=True))
            doc, png = write_docs(quick=True)
            print(f"wrote {doc} and {png} (quick results: not the published page)")
            return 0
        doc, png = write_docs()
        print(f"wrote {doc} and {png}")
        return 0
    config = _config(args)
    began = time.monotonic()
    runner = {"run": run_bench, "peers": run_peers, "profile": run_profiles}[args.command]
    name = {"run": "bench", "peers": "peers", "profile": "profiles-before"}[args.command]
    results = _run(runner(config), config.loop)
    results["wall_s"] = round(time.monotonic() - began, 1)
    path = save(results, config, name)
    print(f"\nresults in {path} ({results['wall_s']:.0f} s)\n")
    if args.command == "profile":
        return _failures(results)
    partial = args.quick or bool(config.only)
    print(console_summary(quick=partial))
    if partial:
        doc, png = write_docs(quick=True)
        print(f"\nquick run: bench/results/*.json and docs/ left as they were; the page is in {doc}")
        return _failures(results)
    doc, png = write_docs()
    print(f"\nwrote {doc} and {png}")
    return _failures(results)


def _failures(results: dict[str, Any]) -> int:
    """1 when a phase failed (its figures are missing from the page), after everything else was written."""
    failed = results.get("failed_phases", {})
    for name, error in failed.items():
        print(f"phase {name} FAILED: {error}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
