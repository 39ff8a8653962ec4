"""docs/configuration.md, generated from the table of settings (config.settings) and a meaning for each.

`make config-doc` writes it; tests/unit/test_config_reference.py fails when the
page and the table disagree, or when a setting has no meaning written here.
"""

from __future__ import annotations

import enum
import sys
from dataclasses import fields
from datetime import timedelta

from inboxd.config.settings import Settings, env_names, shown_duration
from inboxd.serving.cli import _SETTING_FLAGS, _SWITCH_FLAGS

# Variable -> (the default in words, or "" to show the field's own default; what it means).
MEANINGS: dict[str, tuple[str, str]] = {
    "DATABASE_URL": ("unset: embedded PostgreSQL, only for a loopback server without tokens or TLS", "PostgreSQL to use; every start logs its host, port and database, never its password. Multi-host with `target_session_attrs=read-write` for HA ([operations](operations.md#the-multi-host-url))"),
    "INBOXD_EMBEDDED": ("", "without `DATABASE_URL`, run on the embedded PostgreSQL even with a tokens file, TLS or a listen beyond loopback; unset, such a server refuses to start, naming `DATABASE_URL`"),
    "INBOXD_DATA_DIR": ("", "where the embedded PostgreSQL keeps its data"),
    "INBOXD_LISTEN": ("", "gRPC address (`:0` picks a free port)"),
    "INBOXD_METRICS_LISTEN": ("unset: off", "Prometheus `/metrics` address; beyond loopback refused unless `INBOXD_METRICS_BEYOND_LOOPBACK` (it has no authentication and its labels name namespaces)"),
    "INBOXD_METRICS_BEYOND_LOOPBACK": ("", "serve `/metrics` beyond loopback, when only your scrapers can reach it (a warning at every start)"),
    "INBOXD_METRICS_MAX_NAMESPACES": ("", 'namespaces with a label of their own in the gauges; the rest are summed under `namespace="other"`'),
    "INBOXD_CONSOLE_LISTEN": ("unset: off", "the operators' web console (beyond loopback: tokens file and TLS, or `INBOXD_TRUSTED_NETWORK`)"),
    "INBOXD_CONSOLE_HOSTS": ("", "host names the console answers besides `localhost`, `127.0.0.1`, `[::1]` and its listen address (comma-separated, each with or without a port); any other `Host` gets 421"),
    "INBOXD_CONSOLE_HTTPS": ("", "browsers reach the console over https through a proxy that ends TLS: its cookies become `Secure` and `__Host-`"),
    "INBOXD_TOKENS_FILE": ("unset: open, loopback only", "bearer tokens (hashes), scopes and namespaces; re-read on SIGHUP"),
    "INBOXD_TRUSTED_NETWORK": ("", "serve tokens without TLS beyond loopback, for a TLS-terminating proxy in front (a warning at every start); refused otherwise"),
    "INBOXD_TLS_CERT": ("", "the server's certificate chain (PEM); with `INBOXD_TLS_KEY`, serve TLS. Both are read again on SIGHUP (new connections get the renewed pair; a pair that does not match is refused and the old one stays)"),
    "INBOXD_TLS_KEY": ("", "the certificate's private key (PEM)"),
    "INBOXD_TLS_CLIENT_CA": ("", "require client certificates signed by this CA (mTLS)"),
    "INBOXD_MAX_PAYLOAD_BYTES": ("", "largest payload accepted (at most `64MiB`)"),
    "INBOXD_MAX_ATTEMPTS": ("", "claims per event before dead letters (Release gives one back)"),
    "INBOXD_RETENTION": ("", "COMPLETED events are deleted after this: the dedupe window. Under `1h` is refused unless forced"),
    "INBOXD_RETENTION_FORCE": ("", "accept a retention under the `1h` floor (a warning at every start)"),
    "INBOXD_PAYLOAD_RETENTION": ("unset: as the row", "payloads of COMPLETED events are dropped after this"),
    "INBOXD_BACKOFF_BASE": ("", "retry backoff: uniform in [0, min(cap, base·factor^(attempt−1))]"),
    "INBOXD_BACKOFF_FACTOR": ("", "the backoff's growth per attempt (at least 1)"),
    "INBOXD_BACKOFF_CAP": ("", "the longest backoff"),
    "INBOXD_SHUTDOWN_GRACE": ("", "in-flight calls may finish this long after SIGTERM"),
    "INBOXD_WORKERS": ("", "server processes sharing the listen port (SO_REUSEPORT); with more than one, a parent runs the embedded PostgreSQL, migrations, `/metrics`, the gauges and retention once for all ([operations](operations.md#several-server-processes---workers))"),
    "INBOXD_POOL_SIZE": ("", "database connections per server process (so per replica: `INBOXD_WORKERS` × this, plus 4 for the parent)"),
    "INBOXD_FALLBACK_POLL": ("", "a waiting Claim looks again this often when no wake-up signal came (a lease expired, a signal was lost, say)"),
    "INBOXD_ACTION_STALE_AFTER": ("", "an action INTENDED this long counts as unresolved"),
    "INBOXD_MAX_WAITING_CLAIMS_PER_CALLER": ("", "long-polls one caller may hold at once"),
    "INBOXD_MAX_STREAMS_PER_CALLER": ("", "open `Work` streams one caller (tokens-file entry) may hold at once in one server process, and as many `AcceptStream`s; one more is refused `RESOURCE_EXHAUSTED`"),
    "INBOXD_ACCEPT_STREAM_WINDOW": ("", "unanswered items one `AcceptStream` may hold: the server stops reading the stream at this many until answers free room, so one stream holds at most this × `INBOXD_MAX_PAYLOAD_BYTES` (1 to 10000)"),
    "INBOXD_RESCUE_GRACE": ("", "the lease rescuer returns leases expired longer than this to PENDING"),
    "INBOXD_RESCUE_INTERVAL": ("", "how often the lease rescuer runs (one replica at a time); `0` turns it off"),
    "INBOXD_BULK_POLL": (
        "",
        "how often this instance looks for bulk operations to carry on (an operation started on it is carried at"
        " once; one replica carries each); `0`: this instance carries none",
    ),
    "INBOXD_BULK_MAX_RUNNING_PER_TOKEN": (
        "",
        "RUNNING bulk operations one token may have; a start beyond is RESOURCE_EXHAUSTED and stores nothing"
        " ([operations](operations.md#after-an-outage-replay-what-failed-at-a-pace))",
    ),
    "INBOXD_BULK_MAX_RUNNING": (
        "",
        "RUNNING bulk operations across the deployment (every replica, every token); a start beyond is"
        " RESOURCE_EXHAUSTED and stores nothing",
    ),

    "INBOXD_DESTINATIONS_POLL": ("", "how often this instance re-reads the destinations it delivers to (a new one starts within this); `0`: this instance delivers to none ([operations](operations.md#destinations-push-to-http))"),
    "INBOXD_DESTINATIONS_ALLOW": ("unset: none", "internal addresses destinations may reach: comma-separated CIDRs (`10.1.0.0/16`, `127.0.0.1/32`), addresses or host names. Every other loopback, private, link-local, CGNAT, multicast or reserved address is refused after DNS resolution"),
    "INBOXD_DESTINATIONS_ALLOW_HTTP": ("", "destinations may use plain `http://` URLs (default: `https` only)"),
    "INBOXD_STALE_REVISIONS": ("", "an event at or below its ordering key's applied revision: `ignore` completes it IGNORED at claim time, with a reason; `deliver` hands it out with `stale` set"),
    "INBOXD_MAX_CONNECTIONS": ("", "gRPC connections held at once; lowered at start to the descriptor limit less the pool and 128 (a warning says so; [operations](operations.md#security))"),
    "INBOXD_MAX_STREAMS_PER_CONNECTION": ("", "calls one connection may have in flight (more wait in the client); keep it above `INBOXD_MAX_WAITING_CLAIMS_PER_CALLER`, or a worker's Completes wait behind its long-polls"),
    "INBOXD_CONNECTION_IDLE": ("", "a connection with no call in flight this long is closed (clients reconnect on their next call)"),
    "INBOXD_CONNECTION_AGE": ("", "every connection is closed after this long (±10%), its calls first given `INBOXD_CONNECTION_AGE_GRACE`"),
    "INBOXD_CONNECTION_AGE_GRACE": ("", "how long an aged connection's calls may finish (more than a long-poll's 60 s)"),
    "INBOXD_HANDSHAKE_TIMEOUT": ("", "a connection that has not finished its TLS and HTTP/2 handshake by then is closed"),
    "INBOXD_UNAUTHENTICATED_CONNECTION_AGE": ("", "with a tokens file: a connection whose calls (health checks, say) carried no valid token this long after its first one is closed (within a second more), so strangers cannot hold the connection cap; `0` turns it off"),

    "INBOXD_KEEPALIVE_TIME": ("", "the server pings every connection this often; with `INBOXD_KEEPALIVE_TIMEOUT`, a peer whose path went silent loses its connection and streams within 2 × this + the timeout (15 s), and a Work stream's events go to other workers ([operations](operations.md#a-silent-worker-loses-its-events)). Clients may ping every 5 s (or this, if shorter)"),
    "INBOXD_KEEPALIVE_TIMEOUT": ("", "a connection whose ping is not answered within this is closed, with its streams"),
}  # fmt: skip

# Read where they act, not through Settings: variable -> (default, meaning).
OUTSIDE_SETTINGS: dict[str, tuple[str, str]] = {
    "INBOXD_EVENT_LOOP": ("asyncio", "the server's event loop: `asyncio`, or `uvloop` (after `pip install uvloop`; measured no faster for inboxd's own calls, see `serving/event_loop.py`)"),
    "INBOXD_LOG_LEVEL": ("INFO", "log level; logs are JSON lines (logfmt on a terminal), never payloads or tokens, event keys only as a short hash"),
    "INBOXD_PG_BIN": ("unset: the newest `/usr/lib/postgresql/*/bin`, `/usr/pgsql-*/bin`, then the `PATH`", "where the embedded PostgreSQL's `initdb`, `pg_ctl` and `postgres` are"),
}  # fmt: skip

# Tracing: OpenTelemetry's standard variables, the only way to configure it (observability/tracing.py reads the
# first five, the SDK and its exporter the rest). Variable -> (default, meaning).
TRACING_VARIABLES: dict[str, tuple[str, str]] = {
    "OTEL_TRACES_EXPORTER": ("unset: `otlp` when an OTLP endpoint is set, else off", "the span exporters, comma-separated: `otlp`, `console` (JSON to stderr, beside the logs) or `none`; any other name refuses the start"),
    "OTEL_EXPORTER_OTLP_ENDPOINT": ("unset", "where OTLP sends spans (`http://collector:4317`; `https://` for TLS); set, it turns tracing on unless `OTEL_TRACES_EXPORTER` says otherwise"),
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ("unset", "the same for traces alone; wins over `OTEL_EXPORTER_OTLP_ENDPOINT`"),
    "OTEL_EXPORTER_OTLP_PROTOCOL": ("`grpc`", "`grpc`, or `http/protobuf` once the `opentelemetry-exporter-otlp-proto-http` package is installed (without it the start is refused); `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` wins over it"),
    "OTEL_SDK_DISABLED": ("unset", "`true`: tracing is off whatever the other variables say"),
    "OTEL_SERVICE_NAME": ("`inboxd`", "the `service.name` of every span (else `service.name` in `OTEL_RESOURCE_ATTRIBUTES`)"),
    "OTEL_RESOURCE_ATTRIBUTES": ("unset", "more resource attributes, `key=value,key=value` (`deployment.environment.name=prod`)"),
    "OTEL_TRACES_SAMPLER": ("`parentbased_always_on`", "the SDK's sampler (`parentbased_traceidratio` with `OTEL_TRACES_SAMPLER_ARG=0.1` keeps a tenth of new traces and follows the caller's choice)"),
    "OTEL_TRACES_SAMPLER_ARG": ("unset", "the sampler's argument"),
    "OTEL_BSP_SCHEDULE_DELAY": ("`5000` (ms)", "how often the batch span processor exports; also `OTEL_BSP_MAX_QUEUE_SIZE` (2048: spans beyond it are dropped, never waited for), `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` (512), `OTEL_BSP_EXPORT_TIMEOUT` (30000 ms)"),
    "OTEL_EXPORTER_OTLP_HEADERS": ("unset", "headers on every export (`authorization=Bearer ...`); also `OTEL_EXPORTER_OTLP_TIMEOUT`, `_COMPRESSION`, `_INSECURE`, `_CERTIFICATE`, `_CLIENT_KEY`, `_CLIENT_CERTIFICATE`, each with a `_TRACES_` form"),
    "OTEL_SPAN_LINK_COUNT_LIMIT": ("`128`", "links one span keeps: a group commit's span links to each of its callers' spans"),
}  # fmt: skip

HEADER = """# Configuration reference

Generated by `make config-doc` from `server/inboxd/config/settings.py` (the
table of settings) and `server/inboxd/serving/config_reference.py` (what each
means); a test fails when this page and the code disagree. Do not edit it by hand.

Every setting is an environment variable, and most are also a flag of
`inboxd serve` of the same meaning (a flag wins). An
empty variable counts as unset. Durations: `500ms`, `30s`, `15m`, `2h`, `7d`
(a bare number is seconds). Sizes: `1048576`, `512KiB`, `1MiB`. Switches:
`1`/`true`/`yes`/`on` or `0`/`false`/`no`/`off`.

| variable | flag | default | meaning |
|---|---|---|---|
"""


TRACING_HEADER = """
## Tracing

OpenTelemetry's standard variables, and nothing else: off unless one of them
names an exporter (`OTEL_TRACES_EXPORTER`) or an OTLP endpoint. Off, no span
is made and the SDK is not even imported; a variable inboxd cannot honour
refuses the start. Each server process (every `--workers` child too) exports
on its own.

| variable | default | meaning |
|---|---|---|
"""


def _default(value: object) -> str:
    if value is None or value is False or value == ():
        return "unset"
    if isinstance(value, timedelta):
        return f"`{shown_duration(value)}`"
    if isinstance(value, enum.Enum):
        return f"`{value.value}`"
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1024 and value % 1024 == 0:
        for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
            if value % size == 0:
                return f"`{value // size}{unit}`"
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    return f"`{value}`"


def render() -> str:
    """The page's whole text."""
    flags = {name: flag for flag, name in (*_SETTING_FLAGS.items(), *_SWITCH_FLAGS.items())}
    env = env_names()
    defaults = Settings()
    rows = []
    for field in fields(Settings):
        variable = env.get(field.name)
        if variable is None:
            continue
        shown, meaning = MEANINGS[variable]
        flag = f"`{flags[field.name]}`" if field.name in flags else ""
        rows.append(f"| `{variable}` | {flag} | {shown or _default(getattr(defaults, field.name))} | {meaning} |")
    for variable, (shown, meaning) in OUTSIDE_SETTINGS.items():
        rows.append(f"| `{variable}` | | {shown} | {meaning} |")
    tracing = [f"| `{variable}` | {shown} | {meaning} |" for variable, (shown, meaning) in TRACING_VARIABLES.items()]
    return HEADER + "\n".join(rows) + "\n" + TRACING_HEADER + "\n".join(tracing) + "\n"


def main() -> None:
    sys.stdout.write(render())


if __name__ == "__main__":
    main()
