"""The `inboxd-edge` command: run the edge from a configuration file until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import inboxd_edge
from inboxd_edge.config import ConfigError, load_config
from inboxd_edge.serve import start_edge


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="inboxd-edge", description="HTTP edge receiver for inboxd.")
    parser.add_argument("--version", action="version", version=f"inboxd-edge {inboxd_edge.__version__}")
    parser.add_argument(
        "--config",
        default=os.environ.get("INBOXD_EDGE_CONFIG"),
        help="routes file, .toml or .json (env INBOXD_EDGE_CONFIG)",
    )
    parser.add_argument(
        "--listen",
        default=os.environ.get("INBOXD_EDGE_LISTEN"),
        help="host:port to listen on (env INBOXD_EDGE_LISTEN; default from the file, else 127.0.0.1:8081)",
    )
    parser.add_argument(
        "--inboxd",
        default=os.environ.get("INBOXD_TARGET"),
        help="inboxd's host:port (env INBOXD_TARGET; default from the file, else 127.0.0.1:50051)",
    )
    return parser


async def _serve(args: argparse.Namespace) -> None:
    config = load_config(Path(args.config), os.environ)
    if args.inboxd:
        config = replace(config, inboxd=replace(config.inboxd, target=args.inboxd))
    where = args.listen or config.listen
    try:
        edge = await start_edge(config, listen=args.listen)
    except OSError as exc:
        # One line, not a traceback: the usual cause is another program on the port (the console's, say).
        raise ConfigError(
            f"cannot listen on {where}: {exc.strerror or exc}; choose another address with --listen,"
            " INBOXD_EDGE_LISTEN or [edge] listen"
        ) from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # The readiness line scripts and tests wait for.
    print(f"inboxd-edge listening on {edge.host}:{edge.port}", flush=True)
    try:
        await stop.wait()
    finally:
        await edge.stop()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not args.config:
        print("inboxd-edge: --config (or INBOXD_EDGE_CONFIG) is required", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        asyncio.run(_serve(args))
    except ConfigError as exc:
        print(f"inboxd-edge: {exc}", file=sys.stderr)
        return 2
    return 0
