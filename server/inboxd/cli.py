"""The `inboxd` command: serve, migrate, and (later) the operator's subcommands."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from inboxd.config import ConfigError, Settings, env_names, load_settings
from inboxd.embedded_pg import EmbeddedPostgres, EmbeddedPostgresError
from inboxd.errors import Unavailable
from inboxd.server import start_server
from inboxd.store.database import Database
from inboxd.store.migrate import migrate

log = logging.getLogger("inboxd")

# Flags that mirror a setting: flag -> Settings field.
_SETTING_FLAGS = {
    "--database-url": "database_url",
    "--data-dir": "data_dir",
    "--listen": "listen",
    "--metrics-listen": "metrics_listen",
    "--tokens-file": "tokens_file",
    "--tls-cert": "tls_cert",
    "--tls-key": "tls_key",
    "--tls-client-ca": "tls_client_ca",
    "--max-payload-bytes": "max_payload_bytes",
    "--max-attempts": "max_attempts",
    "--retention": "retention",
    "--payload-retention": "payload_retention",
}
MIGRATE_WAIT_SECONDS = 60.0


def _add_setting_flags(parser: argparse.ArgumentParser) -> None:
    env = env_names()
    for flag, field_name in _SETTING_FLAGS.items():
        parser.add_argument(flag, dest=field_name, default=None, help=f"same as {env[field_name]}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="inboxd", description="A durable inbox for webhook events.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the gRPC service")
    _add_setting_flags(serve)
    mig = commands.add_parser("migrate", help="apply database migrations and exit")
    _add_setting_flags(mig)
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    overrides = {field_name: getattr(args, field_name, None) for field_name in _SETTING_FLAGS.values()}
    return load_settings(os.environ, overrides)


class _Database:
    """The configured database, or an embedded one started (and later stopped) here."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.embedded: EmbeddedPostgres | None = None

    def start(self) -> str:
        if self.settings.database_url:
            return self.settings.database_url
        self.embedded = EmbeddedPostgres(data_dir=_embedded_dir(self.settings.data_dir))
        url = self.embedded.start()
        log.info("embedded PostgreSQL in %s on 127.0.0.1:%d", self.embedded.data_dir, self.embedded.port)
        return url

    def stop(self) -> None:
        if self.embedded is not None:
            self.embedded.stop()


def _embedded_dir(data_dir: Path) -> Path:
    return data_dir / "postgres"


async def _migrate_with_patience(url: str) -> None:
    """Waits for the database to come up, then migrates; a clear error after a minute."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + MIGRATE_WAIT_SECONDS
    while True:
        try:
            applied = await migrate(url)
            if applied:
                log.info("applied migrations: %s", ", ".join(applied))
            return
        except Unavailable as exc:
            if loop.time() > deadline:
                raise SystemExit(
                    f"inboxd: cannot reach the database after {MIGRATE_WAIT_SECONDS:.0f} s: {exc}"
                ) from None
            log.warning("database not reachable yet (%s); retrying", exc)
            await asyncio.sleep(1.0)


async def _serve(settings: Settings) -> None:
    if settings.tokens_file is None and settings.listens_beyond_loopback():
        raise SystemExit(
            f"inboxd: refusing to listen on {settings.listen} without a tokens file: every RPC would be "
            "open to the network. Set INBOXD_TOKENS_FILE, or listen on 127.0.0.1."
        )
    database = _Database(settings)
    url = await asyncio.to_thread(database.start)
    try:
        await _migrate_with_patience(url)
        db = Database(url, max_size=settings.pool_size)
        await db.open()
        try:
            running = await start_server(settings, db)
            host = settings.listen.rpartition(":")[0]
            if settings.tokens_file is None:
                log.warning("no tokens file: every RPC, admin included, is open to callers on loopback")
            # One line on stdout, for scripts and tests that wait for readiness.
            print(f"inboxd serving on {host}:{running.port}", flush=True)
            await _until_signalled()
            log.info("shutting down: finishing in-flight calls for up to %s", settings.shutdown_grace)
            await running.stop(settings.shutdown_grace.total_seconds())
        finally:
            await db.close()
    finally:
        await asyncio.to_thread(database.stop)


async def _until_signalled() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


async def _migrate_only(settings: Settings) -> None:
    database = _Database(settings)
    url = await asyncio.to_thread(database.start)
    try:
        applied = await migrate(url)
        print("applied: " + (", ".join(applied) if applied else "nothing, the schema is current"))
    finally:
        await asyncio.to_thread(database.stop)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = _settings(args)
        if args.command == "serve":
            asyncio.run(_serve(settings))
        elif args.command == "migrate":
            asyncio.run(_migrate_only(settings))
    except (ConfigError, EmbeddedPostgresError) as exc:
        print(f"inboxd: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
