"""Settings from the environment, overridden by command-line flags of the same meaning."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from datetime import timedelta
from pathlib import Path

from inboxd.config.values import (
    ConfigError,
    parse_allow_list,
    parse_duration,
    parse_flag,
    parse_host_names,
    parse_size,
    parse_stale_revisions,
    shown_duration,
)
from inboxd.domain.vocabulary import StaleRevisions

# The parsers live in config/values.py; callers import them from here too.
__all__ = [
    "MAX_WORKERS",
    "RETENTION_FLOOR",
    "ConfigError",
    "Settings",
    "beyond_loopback",
    "env_names",
    "load_settings",
    "metrics_refusal",
    "parse_duration",
    "parse_flag",
    "parse_host_names",
    "parse_size",
    "parse_stale_revisions",
    "serving_refusal",
    "shown_duration",
]

# The dedupe window: a provider's redelivery after it is a new event, so a
# shorter window is almost always a typo (INBOXD_RETENTION=0) rather than a plan.
RETENTION_FLOOR = timedelta(hours=1)


# More processes than this on one host is a typo; more cores are better used by more replicas.
MAX_WORKERS = 64


@dataclass(frozen=True)
class Settings:
    database_url: str | None = None
    # Without DATABASE_URL: run on the embedded PostgreSQL even though tokens, TLS or a listen beyond
    # loopback say production (serving/database_choice.py). Unset, such a server refuses to start.
    embedded: bool = False
    data_dir: Path = Path(".inboxd")
    listen: str = "127.0.0.1:50051"
    metrics_listen: str | None = None
    # The operators' web console (inboxd.console); None: off.
    console_listen: str | None = None
    # Host names the console answers besides loopback's and its listen address (behind a proxy, say).
    console_hosts: tuple[str, ...] = ()
    # Browsers reach the console over https through a proxy that ends TLS: Secure, __Host- cookies.
    console_https: bool = False
    tokens_file: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_client_ca: Path | None = None
    max_payload_bytes: int = 1024 * 1024
    max_attempts: int = 10
    retention: timedelta = timedelta(days=7)
    # None: payloads are kept as long as their rows.
    payload_retention: timedelta | None = None
    backoff_base: timedelta = timedelta(seconds=1)
    backoff_factor: float = 2.0
    backoff_cap: timedelta = timedelta(hours=1)
    shutdown_grace: timedelta = timedelta(seconds=10)
    # Waiting (long-polling) Claims one caller may hold at once.
    max_waiting_claims_per_caller: int = 1000
    # Open Work streams, and open AcceptStreams, one caller may hold at once (each kind counted alone).
    max_streams_per_caller: int = 256
    # Unanswered items one AcceptStream may hold: the server stops reading it at
    # this many, so one stream holds at most this x max_payload_bytes.
    accept_stream_window: int = 64
    # An action INTENDED for longer than this counts as unresolved.
    action_stale_after: timedelta = timedelta(minutes=15)
    pool_size: int = 20
    # A waiting Claim looks again this often even without a wake-up signal (one lost, say).
    fallback_poll: timedelta = timedelta(seconds=1)
    # Server processes sharing the listen port (SO_REUSEPORT); 1: this process serves.
    workers: int = 1
    # Allows a retention under RETENTION_FLOOR (logged loudly at start-up).
    retention_force: bool = False
    # Allows bearer tokens in plaintext beyond loopback: TLS ends at a proxy in front (logged loudly).
    trusted_network: bool = False
    # The lease rescuer: leases expired longer than the grace go back to
    # PENDING, one pass per interval (0: off). Back within a minute by default.
    rescue_grace: timedelta = timedelta(seconds=30)
    rescue_interval: timedelta = timedelta(seconds=15)
    # How often the bulk runner looks for RUNNING bulk operations to carry on (0: this instance carries none).
    bulk_poll: timedelta = timedelta(seconds=1)
    # RUNNING bulk operations one token may have, and the deployment in all; a start beyond is RESOURCE_EXHAUSTED.
    bulk_max_running_per_token: int = 4
    bulk_max_running: int = 32

    # Destinations (push to HTTP): how often this instance re-reads them (0: it delivers to none);
    # internal networks and host names they may reach (SSRF guard); plain http allowed.
    destinations_poll: timedelta = timedelta(seconds=2)
    destinations_allow: tuple[str, ...] = ()
    destinations_allow_http: bool = False
    # An event at or below its ordering key's applied revision: "ignore"
    # completes it IGNORED at claim time; "deliver" hands it out flagged stale.
    stale_revisions: StaleRevisions = StaleRevisions.IGNORE
    # /metrics has no authentication and its labels name namespaces (tenants): beyond
    # loopback only when the operator says so (logged loudly). At most this many
    # namespaces get a label of their own; the rest are summed under "other".
    metrics_beyond_loopback: bool = False
    metrics_max_namespaces: int = 100
    # What one caller can make the gRPC server hold (docs/operations.md, Security).
    # Open connections; lowered at start to what the descriptor limit leaves room for.
    max_connections: int = 1000
    # Calls one connection may have in flight at once (HTTP/2 streams); more wait in the client.
    # Above max_waiting_claims_per_caller: a worker's long-polls must leave room for its Completes.
    max_streams_per_connection: int = 2048
    # A connection with no call in flight this long is closed (GOAWAY; clients reconnect on their next call).
    connection_idle: timedelta = timedelta(minutes=5)
    # Every connection is closed after this long (±10%), its calls first given the grace to finish.
    connection_age: timedelta = timedelta(hours=1)
    # Longer than the longest long-poll (60 s), so a waiting Claim answers before its connection goes.
    connection_age_grace: timedelta = timedelta(minutes=2)
    # A connection that has not finished its TLS and HTTP/2 handshake within this is closed.
    handshake_timeout: timedelta = timedelta(seconds=10)
    # With a tokens file: a connection whose calls (health checks, say) carried no valid token this long
    # after its first one is closed, so strangers cannot hold the connection cap. 0: never.
    unauthenticated_connection_age: timedelta = timedelta(seconds=30)

    # The server pings each connection this often, and closes one whose ping is unanswered
    # this long after: a silent peer's streams end (serving/keepalive.py has the bound).
    keepalive_time: timedelta = timedelta(seconds=5)
    keepalive_timeout: timedelta = timedelta(seconds=5)

    @property
    def silent_peer_bound(self) -> timedelta:
        """How long a silent peer's streams may live on: a ping may be skipped once (data came), then one times out."""
        return 2 * self.keepalive_time + self.keepalive_timeout

    @property
    def listen_host(self) -> str:
        host, _, _ = self.listen.rpartition(":")
        return host.strip("[]")

    def listens_beyond_loopback(self) -> bool:
        return beyond_loopback(self.listen)


def beyond_loopback(listen: str) -> bool:
    """Whether a "host:port" listen address may be reached from another machine."""
    host = listen.rpartition(":")[0].strip("[]")
    if host == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True  # a name or a wildcard such as 0.0.0.0 / [::] / "": assume it reaches out


# Environment variable -> (field, parser). Flags use the same fields.
_ENV: dict[str, tuple[str, object]] = {
    "DATABASE_URL": ("database_url", str),
    "INBOXD_EMBEDDED": ("embedded", parse_flag),
    "INBOXD_DATA_DIR": ("data_dir", Path),
    "INBOXD_LISTEN": ("listen", str),
    "INBOXD_METRICS_LISTEN": ("metrics_listen", str),
    "INBOXD_CONSOLE_LISTEN": ("console_listen", str),
    "INBOXD_CONSOLE_HOSTS": ("console_hosts", parse_host_names),
    "INBOXD_CONSOLE_HTTPS": ("console_https", parse_flag),
    "INBOXD_TOKENS_FILE": ("tokens_file", Path),
    "INBOXD_TLS_CERT": ("tls_cert", Path),
    "INBOXD_TLS_KEY": ("tls_key", Path),
    "INBOXD_TLS_CLIENT_CA": ("tls_client_ca", Path),
    "INBOXD_MAX_PAYLOAD_BYTES": ("max_payload_bytes", parse_size),
    "INBOXD_MAX_ATTEMPTS": ("max_attempts", int),
    "INBOXD_RETENTION": ("retention", parse_duration),
    "INBOXD_PAYLOAD_RETENTION": ("payload_retention", parse_duration),
    "INBOXD_BACKOFF_BASE": ("backoff_base", parse_duration),
    "INBOXD_BACKOFF_FACTOR": ("backoff_factor", float),
    "INBOXD_BACKOFF_CAP": ("backoff_cap", parse_duration),
    "INBOXD_SHUTDOWN_GRACE": ("shutdown_grace", parse_duration),
    "INBOXD_POOL_SIZE": ("pool_size", int),
    "INBOXD_ACTION_STALE_AFTER": ("action_stale_after", parse_duration),
    "INBOXD_MAX_WAITING_CLAIMS_PER_CALLER": ("max_waiting_claims_per_caller", int),
    "INBOXD_MAX_STREAMS_PER_CALLER": ("max_streams_per_caller", int),
    "INBOXD_ACCEPT_STREAM_WINDOW": ("accept_stream_window", int),
    "INBOXD_FALLBACK_POLL": ("fallback_poll", parse_duration),
    "INBOXD_WORKERS": ("workers", int),
    "INBOXD_RETENTION_FORCE": ("retention_force", parse_flag),
    "INBOXD_TRUSTED_NETWORK": ("trusted_network", parse_flag),
    "INBOXD_RESCUE_GRACE": ("rescue_grace", parse_duration),
    "INBOXD_RESCUE_INTERVAL": ("rescue_interval", parse_duration),
    "INBOXD_BULK_POLL": ("bulk_poll", parse_duration),
    "INBOXD_BULK_MAX_RUNNING_PER_TOKEN": ("bulk_max_running_per_token", int),
    "INBOXD_BULK_MAX_RUNNING": ("bulk_max_running", int),
    "INBOXD_DESTINATIONS_POLL": ("destinations_poll", parse_duration),
    "INBOXD_DESTINATIONS_ALLOW": ("destinations_allow", parse_allow_list),
    "INBOXD_DESTINATIONS_ALLOW_HTTP": ("destinations_allow_http", parse_flag),
    "INBOXD_STALE_REVISIONS": ("stale_revisions", parse_stale_revisions),
    "INBOXD_METRICS_BEYOND_LOOPBACK": ("metrics_beyond_loopback", parse_flag),
    "INBOXD_METRICS_MAX_NAMESPACES": ("metrics_max_namespaces", int),
    "INBOXD_MAX_CONNECTIONS": ("max_connections", int),
    "INBOXD_MAX_STREAMS_PER_CONNECTION": ("max_streams_per_connection", int),
    "INBOXD_CONNECTION_IDLE": ("connection_idle", parse_duration),
    "INBOXD_CONNECTION_AGE": ("connection_age", parse_duration),
    "INBOXD_CONNECTION_AGE_GRACE": ("connection_age_grace", parse_duration),
    "INBOXD_HANDSHAKE_TIMEOUT": ("handshake_timeout", parse_duration),
    "INBOXD_UNAUTHENTICATED_CONNECTION_AGE": ("unauthenticated_connection_age", parse_duration),
    "INBOXD_KEEPALIVE_TIME": ("keepalive_time", parse_duration),
    "INBOXD_KEEPALIVE_TIMEOUT": ("keepalive_timeout", parse_duration),
}
_NAMED_PARSERS = (parse_duration, parse_size, parse_flag, parse_stale_revisions)


def env_names() -> dict[str, str]:
    """Field name -> environment variable, for flags' help texts."""
    return {field_name: env for env, (field_name, _) in _ENV.items()}


def metrics_refusal(settings: Settings) -> str | None:
    """Why /metrics must not listen where the settings say (open to the network, naming tenants), or None."""
    listen = settings.metrics_listen
    if listen is None or not beyond_loopback(listen) or settings.metrics_beyond_loopback:
        return None
    return (
        f"refusing to serve /metrics on {listen}: it has no authentication, and its labels name up to "
        f"{settings.metrics_max_namespaces} namespaces (tenants). Set INBOXD_METRICS_LISTEN to 127.0.0.1:PORT "
        "and scrape through something that authenticates, or, when only your scrapers can reach that address, "
        "set INBOXD_METRICS_BEYOND_LOOPBACK=1 (--metrics-beyond-loopback)."
    )


def serving_refusal(settings: Settings) -> str | None:
    """Why `inboxd serve` must not start with these settings (bearer tokens or metrics exposed), or None."""
    metrics = metrics_refusal(settings)
    if metrics is not None:
        return metrics
    if not settings.listens_beyond_loopback():
        return None
    if settings.tokens_file is None:
        return (
            f"refusing to listen on {settings.listen} without a tokens file: every RPC would be "
            "open to the network. Set INBOXD_TOKENS_FILE, or listen on 127.0.0.1."
        )
    if settings.tls_cert is None and not settings.trusted_network:
        return (
            f"refusing to listen on {settings.listen} without TLS: bearer tokens would cross the network "
            "in plaintext. Set INBOXD_TLS_CERT and INBOXD_TLS_KEY, listen on 127.0.0.1, or, when a proxy in "
            "front terminates TLS on a network you trust, set INBOXD_TRUSTED_NETWORK=1 (--trusted-network)."
        )
    return None


def load_settings(env: Mapping[str, str], overrides: Mapping[str, str | None] | None = None) -> Settings:
    """Settings from `env`, then from `overrides` (raw flag values by field name)."""
    raw: dict[str, str] = {}
    for env_name, (field_name, _) in _ENV.items():
        if env.get(env_name):
            raw[field_name] = env[env_name]
    for field_name, value in (overrides or {}).items():
        if value is not None:
            raw[field_name] = value
    parsers = {field_name: parser for field_name, parser in _ENV.values()}
    known = {f.name for f in fields(Settings)}
    values: dict[str, object] = {}
    for field_name, text in raw.items():
        if field_name not in known:
            raise ConfigError(f"unknown setting {field_name!r}")
        parser = parsers[field_name]
        env_name = env_names()[field_name]
        try:
            values[field_name] = parser(env_name, text) if parser in _NAMED_PARSERS else parser(text)  # type: ignore[operator]
        except ValueError as exc:
            raise ConfigError(f"{env_name}={text!r}: {exc}") from None
    settings = replace(Settings(), **values)  # type: ignore[arg-type]
    _check(settings)
    _check_metrics(settings)
    _check_streams(settings)
    return settings


def _check_metrics(settings: Settings) -> None:
    if settings.metrics_max_namespaces < 1:
        raise ConfigError(f"INBOXD_METRICS_MAX_NAMESPACES must be at least 1, not {settings.metrics_max_namespaces}")


def _check_streams(settings: Settings) -> None:
    if not 1 <= settings.accept_stream_window <= 10_000:
        raise ConfigError(
            f"INBOXD_ACCEPT_STREAM_WINDOW must be between 1 and 10000, not {settings.accept_stream_window}"
        )
    if settings.max_streams_per_caller < 1:
        raise ConfigError(f"INBOXD_MAX_STREAMS_PER_CALLER must be at least 1, not {settings.max_streams_per_caller}")


def _check(settings: Settings) -> None:
    if settings.max_attempts < 1:
        raise ConfigError(f"INBOXD_MAX_ATTEMPTS must be at least 1, not {settings.max_attempts}")
    if settings.max_payload_bytes < 1:
        raise ConfigError("INBOXD_MAX_PAYLOAD_BYTES must be positive")
    if settings.max_payload_bytes > 64 * 1024 * 1024:
        raise ConfigError("INBOXD_MAX_PAYLOAD_BYTES is capped at 64MiB: an inbox is no blob store")
    if settings.backoff_factor < 1:
        raise ConfigError("INBOXD_BACKOFF_FACTOR must be at least 1")
    if settings.pool_size < 2:
        raise ConfigError("INBOXD_POOL_SIZE must be at least 2")
    if settings.fallback_poll <= timedelta(0):
        raise ConfigError("INBOXD_FALLBACK_POLL must be positive")
    if not 1 <= settings.workers <= MAX_WORKERS:
        raise ConfigError(f"INBOXD_WORKERS must be between 1 and {MAX_WORKERS}, not {settings.workers}")
    if settings.retention < RETENTION_FLOOR and not settings.retention_force:
        raise ConfigError(
            f"INBOXD_RETENTION={shown_duration(settings.retention)} is under the floor of "
            f"{shown_duration(RETENTION_FLOOR)}: it is the dedupe window, and a provider's redelivery after it "
            "is processed again as a new event. Set it longer than providers keep redelivering (days), or, "
            "if you mean it, force it with INBOXD_RETENTION_FORCE=1 (--force-retention)."
        )
    if ":" not in settings.listen:
        raise ConfigError(f"INBOXD_LISTEN={settings.listen!r} needs a host and a port, e.g. 127.0.0.1:50051")
    if settings.console_listen is not None and ":" not in settings.console_listen:
        raise ConfigError(
            f"INBOXD_CONSOLE_LISTEN={settings.console_listen!r} needs a host and a port, e.g. 127.0.0.1:8080"
        )
    _check_connection_bounds(settings)
    if (settings.tls_cert is None) != (settings.tls_key is None):
        raise ConfigError("INBOXD_TLS_CERT and INBOXD_TLS_KEY go together")
    if settings.tls_client_ca is not None and settings.tls_cert is None:
        raise ConfigError("INBOXD_TLS_CLIENT_CA needs INBOXD_TLS_CERT and INBOXD_TLS_KEY")


def _check_connection_bounds(settings: Settings) -> None:
    for name, count in (
        ("INBOXD_MAX_CONNECTIONS", settings.max_connections),
        ("INBOXD_MAX_STREAMS_PER_CONNECTION", settings.max_streams_per_connection),
        ("INBOXD_BULK_MAX_RUNNING_PER_TOKEN", settings.bulk_max_running_per_token),
        ("INBOXD_BULK_MAX_RUNNING", settings.bulk_max_running),
    ):
        if count < 1:
            raise ConfigError(f"{name} must be at least 1, not {count}")
    for name, duration in (
        ("INBOXD_CONNECTION_IDLE", settings.connection_idle),
        ("INBOXD_CONNECTION_AGE", settings.connection_age),
        ("INBOXD_CONNECTION_AGE_GRACE", settings.connection_age_grace),
        ("INBOXD_HANDSHAKE_TIMEOUT", settings.handshake_timeout),
        ("INBOXD_KEEPALIVE_TIME", settings.keepalive_time),
        ("INBOXD_KEEPALIVE_TIMEOUT", settings.keepalive_timeout),
    ):
        # grpc takes them as a C int of milliseconds (24 days).
        if not timedelta(milliseconds=1) <= duration <= timedelta(milliseconds=2**31 - 1):
            raise ConfigError(f"{name}={shown_duration(duration)} must be between 1ms and 24d")
    if settings.unauthenticated_connection_age < timedelta(0):
        raise ConfigError("INBOXD_UNAUTHENTICATED_CONNECTION_AGE must not be negative (0 turns it off)")
