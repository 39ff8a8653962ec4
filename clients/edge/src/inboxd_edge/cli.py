"""The `inboxd-edge` command: run the edge from a configuration file until SIGTERM or SIGINT; SIGHUP reloads routes."""

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
from inboxd_edge.edge_descriptors import install_out_of_descriptors_log, raise_descriptor_limit
from inboxd_edge.edge_logs import configure_logging

log = logging.getLogger("inboxd_edge")


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
    parser.add_argument(
        "--workers",
        type=int,
        default=int(os.environ.get("INBOXD_EDGE_WORKERS") or 1),
        help="edge processes sharing the port with SO_REUSEPORT (env INBOXD_EDGE_WORKERS; default 1)",
    )
    # Set by the parent of --workers N on each child it starts; never by a person.
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return parser


async def _serve(args: argparse.Namespace) -> None:
    # Before anything opens a descriptor; --workers children inherit it.
    before, after = raise_descriptor_limit()
    if after != before:
        log.info("descriptor limit raised from %d to %d", before, after)
    install_out_of_descriptors_log(asyncio.get_running_loop())
    config = load_config(Path(args.config), os.environ)
    if args.inboxd:
        config = replace(config, inboxd=replace(config.inboxd, target=args.inboxd))
    where = args.listen or config.listen
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if args.workers > 1 and not args.worker:
        from inboxd_edge.workers import Workers

        await Workers(args.workers, _child_args(args), where, stop).run(config.ops.metrics.listen)
        return
    # Imported here: under --workers the parent must not import prometheus_client before it sets the folder.
    from inboxd_edge.reload import RouteReloader
    from inboxd_edge.serve import start_edge

    try:
        edge = await start_edge(config, listen=where, reuse_port=args.worker, serve_metrics=not args.worker)
    except OSError as exc:
        # One line, not a traceback: the usual cause is another program on the port (the console's, say).
        raise ConfigError(
            f"cannot listen on {where}: {exc.strerror or exc}; choose another address with --listen,"
            " INBOXD_EDGE_LISTEN or [edge] listen"
        ) from None
    RouteReloader(edge, Path(args.config), config).install()
    watch = None
    if args.worker:
        from inboxd_edge.workers import stop_when_parent_goes

        watch = asyncio.create_task(stop_when_parent_goes(stop))
    if edge.metrics_port is not None:
        log.info("metrics on %s (port %d)", config.ops.metrics.listen, edge.metrics_port)
    # The readiness line scripts and tests wait for.
    print(f"inboxd-edge listening on {edge.host}:{edge.port}", flush=True)
    try:
        await stop.wait()
    finally:
        if watch is not None:
            watch.cancel()
        await edge.stop()


def _child_args(args: argparse.Namespace) -> list[str]:
    child = ["--config", str(args.config)]
    if args.inboxd:
        child += ["--inboxd", args.inboxd]
    return child


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not args.config:
        print("inboxd-edge: --config (or INBOXD_EDGE_CONFIG) is required", file=sys.stderr)
        return 2
    if args.workers < 1:
        print(f"inboxd-edge: --workers must be at least 1, not {args.workers}", file=sys.stderr)
        return 2
    configure_logging(_log_format(Path(args.config)))
    try:
        asyncio.run(_serve(args))
    except ConfigError as exc:
        print(f"inboxd-edge: {exc}", file=sys.stderr)
        return 2
    return 0


def _log_format(path: Path) -> str:
    """[log] format, read before anything logs; a file that does not load logs as text, then is refused."""
    try:
        return load_config(path, os.environ).ops.log.format
    except ConfigError:
        return "text"
