"""The `inboxd` command: serve, migrate, and (later) the operator's subcommands."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence

import inboxd
from inboxd.config.settings import (
    RETENTION_FLOOR,
    ConfigError,
    Settings,
    beyond_loopback,
    env_names,
    load_settings,
    serving_refusal,
    shown_duration,
)
from inboxd.config.tokens import TokenRegistry, TokensFileError
from inboxd.domain.errors import Unavailable
from inboxd.observability.logs import configure_logging
from inboxd.serving import event_loop
from inboxd.serving.admin_cli import COMMANDS as ADMIN_COMMANDS
from inboxd.serving.admin_cli import add_admin_commands, run_admin_command
from inboxd.serving.connections import install_out_of_descriptors_log, raise_descriptor_limit
from inboxd.serving.database_choice import ChosenDatabase
from inboxd.serving.embedded_pg import EmbeddedPostgresError
from inboxd.serving.migrate_cli import add_migrate_options, run_migrate
from inboxd.serving.server import freeze_start_up_objects, start_server
from inboxd.serving.supervisor import Supervisor
from inboxd.serving.tls_reload import ServerCertificates
from inboxd.serving.tokens_admin import add_token_commands, run_token_command
from inboxd.serving.tracing_setup import start_process_tracing, stop_process_tracing
from inboxd.store.database import Database
from inboxd.store.migrate import migrate

log = logging.getLogger("inboxd")

# Flags that mirror a setting: flag -> Settings field.
_SETTING_FLAGS = {
    "--database-url": "database_url",
    "--data-dir": "data_dir",
    "--listen": "listen",
    "--metrics-listen": "metrics_listen",
    "--console-listen": "console_listen",
    "--console-hosts": "console_hosts",
    "--tokens-file": "tokens_file",
    "--tls-cert": "tls_cert",
    "--tls-key": "tls_key",
    "--tls-client-ca": "tls_client_ca",
    "--max-payload-bytes": "max_payload_bytes",
    "--max-attempts": "max_attempts",
    "--retention": "retention",
    "--payload-retention": "payload_retention",
    "--workers": "workers",
    "--stale-revisions": "stale_revisions",
    "--max-connections": "max_connections",
    "--max-streams-per-connection": "max_streams_per_connection",
    "--connection-idle": "connection_idle",
    "--connection-age": "connection_age",
    "--connection-age-grace": "connection_age_grace",
    "--handshake-timeout": "handshake_timeout",
    "--unauthenticated-connection-age": "unauthenticated_connection_age",
}
# On/off flags that force a setting on: flag -> Settings field.
_SWITCH_FLAGS = {
    "--force-retention": "retention_force",
    "--trusted-network": "trusted_network",
    "--console-https": "console_https",
    "--metrics-beyond-loopback": "metrics_beyond_loopback",
    "--embedded": "embedded",
}
MIGRATE_WAIT_SECONDS = 60.0


# What `inboxd migrate` reads: where the database is, nothing of serving.
_MIGRATE_FLAGS = ("--database-url", "--data-dir", "--embedded")


ENVIRONMENT_HELP = """environment:
  serve and migrate: every flag has a variable of the same meaning (see `inboxd serve --help`), e.g.
    DATABASE_URL, INBOXD_LISTEN, INBOXD_TOKENS_FILE, INBOXD_TLS_CERT, INBOXD_TLS_KEY, INBOXD_EMBEDDED;
    besides: INBOXD_LOG_LEVEL (default INFO), INBOXD_PG_BIN (the PostgreSQL binaries' folder), OTEL_* (tracing),
    GRPC_VERBOSITY (gRPC's own lines; default ERROR)
  the admin commands (stats, events, show, ...): INBOXD_TARGET (host:port, default 127.0.0.1:50051),
    INBOXD_TOKEN, INBOXD_TLS_CA, INBOXD_TRUSTED_NETWORK
  token list and revoke: INBOXD_TOKENS_FILE
  every setting, its default and meaning: docs/configuration.md"""


def _add_setting_flags(parser: argparse.ArgumentParser, only: Sequence[str] | None = None) -> None:
    env = env_names()
    for flag, field_name in _SETTING_FLAGS.items():
        if only is not None and flag not in only:
            continue
        parser.add_argument(flag, dest=field_name, default=None, help=f"same as {env[field_name]}")
    for flag, field_name in _SWITCH_FLAGS.items():
        if only is not None and flag not in only:
            continue
        parser.add_argument(
            flag, dest=field_name, action="store_const", const="1", default=None, help=f"same as {env[field_name]}=1"
        )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="inboxd",
        description="A durable inbox for webhook events.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=ENVIRONMENT_HELP,
    )
    parser.add_argument("--version", action="version", version=f"inboxd {inboxd.__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    flagged = {*_SETTING_FLAGS.values(), *_SWITCH_FLAGS.values()}
    unflagged = sorted(env for field_name, env in env_names().items() if field_name not in flagged)
    serve = commands.add_parser(
        "serve",
        help="run the gRPC service",
        epilog="also read from the environment, with no flag: " + ", ".join(unflagged),
    )
    _add_setting_flags(serve)
    mig = commands.add_parser("migrate", help="apply database migrations and exit")
    _add_setting_flags(mig, only=_MIGRATE_FLAGS)
    add_migrate_options(mig)
    add_token_commands(commands.add_parser("token", help="manage bearer tokens: create, list, revoke"))
    add_admin_commands(commands)
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    names = (*_SETTING_FLAGS.values(), *_SWITCH_FLAGS.values())
    overrides = {field_name: getattr(args, field_name, None) for field_name in names}
    return load_settings(os.environ, overrides)


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


def warn_about_forced_settings(settings: Settings) -> None:
    """Settings that weaken a guarantee on purpose are said loudly, at every start."""
    if settings.retention < RETENTION_FLOOR:
        log.warning(
            "INBOXD_RETENTION=%s is under the floor of %s, forced by INBOXD_RETENTION_FORCE: a provider's "
            "redelivery after that long is processed again as a new event",
            shown_duration(settings.retention),
            shown_duration(RETENTION_FLOOR),
        )
    if settings.trusted_network and settings.listens_beyond_loopback() and settings.tls_cert is None:
        log.warning(
            "INBOXD_TRUSTED_NETWORK is set: bearer tokens cross the network to %s in plaintext; "
            "only a TLS-terminating proxy on a network you trust may stand between callers and inboxd",
            settings.listen,
        )
    if settings.metrics_listen and settings.metrics_beyond_loopback and beyond_loopback(settings.metrics_listen):
        log.warning(
            "INBOXD_METRICS_BEYOND_LOOPBACK is set: /metrics on %s answers anyone who reaches it, without "
            "authentication, and its labels name namespaces",
            settings.metrics_listen,
        )


async def _serve(settings: Settings) -> None:
    refusal = serving_refusal(settings)
    if refusal is not None:
        raise SystemExit(f"inboxd: {refusal}")
    # Refused here, before the database starts, as a bad setting is; on, it is this process's (the children start
    # their own).
    start_process_tracing()
    try:
        await _serve_traced(settings)
    finally:
        await stop_process_tracing()


async def _serve_traced(settings: Settings) -> None:
    log.info("inboxd %s starting", inboxd.__version__)
    warn_about_forced_settings(settings)
    # Before anything opens a descriptor; --workers children inherit it.
    before, after = raise_descriptor_limit()
    if after != before:
        log.info("descriptor limit raised from %d to %d", before, after)
    # Here too, not only in start_server: under --workers N this process serves the console and /metrics.
    install_out_of_descriptors_log(asyncio.get_running_loop())
    # Handlers first: a SIGTERM during start-up must still stop cleanly (and
    # stop the embedded PostgreSQL), not kill the process with the default action.
    stop = _stop_on_signals()
    # Read before anything starts: a broken tokens file must stop start-up, not open the door.
    registry = TokenRegistry(settings.tokens_file) if settings.tokens_file else None
    if registry is None:
        log.warning("no tokens file: every RPC, admin included, is open to callers on loopback")
    # The database is started (embedded) and migrated once, here, and stopped
    # last, after every server process has drained.
    database = ChosenDatabase(settings, os.environ)
    url = await asyncio.to_thread(database.start)
    try:
        await _migrate_with_patience(url)
        if settings.workers > 1:
            await Supervisor(settings, url, stop, registry).run()
        else:
            await _serve_in_this_process(settings, url, registry, stop)
    finally:
        await asyncio.to_thread(database.stop)
        log.info("inboxd stopped")


async def _serve_in_this_process(
    settings: Settings, url: str, registry: TokenRegistry | None, stop: asyncio.Event
) -> None:
    db = Database(url, max_size=settings.pool_size)
    await db.open()
    try:
        running = await start_server(settings, db, registry=registry)
        freeze_start_up_objects()
        host = settings.listen.rpartition(":")[0]
        _reload_on_sighup(registry, running.certificates)
        # One line on stdout, for scripts and tests that wait for readiness.
        print(f"inboxd serving on {host}:{running.port}", flush=True)
        await stop.wait()
        log.info("shutting down: finishing in-flight calls for up to %s", settings.shutdown_grace)
        await running.stop(settings.shutdown_grace.total_seconds())
    finally:
        await db.close()


def _reload_on_sighup(registry: TokenRegistry | None, certificates: ServerCertificates | None) -> None:
    """SIGHUP reads the tokens file and the TLS certificate again, each kept as it was if the new one is bad."""

    def reload() -> None:
        if registry is not None:
            try:
                count = registry.reload()
                log.info("tokens file %s reloaded: %d tokens", registry.path, count)
            except TokensFileError as exc:
                log.error("tokens file not reloaded, the previous tokens stay in force: %s", exc)
        if certificates is not None:
            certificates.reload_logged(log)

    asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, reload)


def _stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command in ADMIN_COMMANDS:
        return run_admin_command(args)
    configure_logging(sys.stderr)
    try:
        if args.command == "token":
            run_token_command(args)
            return 0
        settings = _settings(args)
        if args.command == "serve":
            event_loop.run(_serve(settings))
        elif args.command == "migrate":
            asyncio.run(run_migrate(settings, args))
    except (ConfigError, EmbeddedPostgresError, TokensFileError) as exc:
        print(f"inboxd: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
