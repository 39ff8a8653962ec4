"""`python -m bench run | peers | report`: see the package docstring."""

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

from bench.figures import console_peers, console_table
from bench.report import load, write_docs
from bench.suite import Config, run_bench, run_peers, save


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description="inboxd's benchmarks (never run in CI)")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (("run", "inboxd against raw PostgreSQL"), ("peers", "inboxd beside PgQueuer, Procrastinate")):
        cmd = commands.add_parser(name, help=text)
        cmd.add_argument("--quick", action="store_true", help="a smoke run: tiny windows, results not published")
        cmd.add_argument("--duration", type=float, help="seconds per measurement window")
        cmd.add_argument("--history-rows", type=int, help="COMPLETED rows for the history phase (default 5M)")
        cmd.add_argument("--peer-jobs", type=int, help="jobs per peer round")
        cmd.add_argument(
            "--loop",
            choices=("asyncio", "uvloop"),
            default="uvloop",
            help="the load generator's event loop (the server always runs its own default)",
        )
    commands.add_parser("report", help="rewrite docs/benchmarks.md and .png from bench/results/*.json")
    return parser


def _config(args: argparse.Namespace) -> Config:
    config = Config.quick() if args.quick else Config()
    changes: dict[str, Any] = {"loop": args.loop}
    if args.duration is not None:
        changes["duration"] = args.duration
    if args.history_rows is not None:
        changes["history_rows"] = args.history_rows
    if args.peer_jobs is not None:
        changes["peer_jobs"] = args.peer_jobs
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
    if args.command == "report":
        doc, png = write_docs()
        print(f"wrote {doc} and {png}")
        return 0
    config = _config(args)
    began = time.monotonic()
    if args.command == "run":
        results = _run(run_bench(config), config.loop)
        name = "bench"
    else:
        results = _run(run_peers(config), config.loop)
        name = "peers"
    results["wall_s"] = round(time.monotonic() - began, 1)
    path = save(results, f"quick-{name}" if args.quick else name)
    print(f"\nresults in {path} ({results['wall_s']:.0f} s)\n")
    bench = results if name == "bench" else load("bench")
    peers = results if name == "peers" else load("peers")
    if peers is not None and name == "peers":
        print(console_peers(peers) + "\n")
    if bench is not None:
        print(console_table(bench, peers))
    if args.quick:
        print("\nquick run: docs/benchmarks.md left as it was")
        return 0
    doc, png = write_docs()
    print(f"\nwrote {doc} and {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
