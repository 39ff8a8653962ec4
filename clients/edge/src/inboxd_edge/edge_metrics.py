"""The edge's Prometheus metrics, all named `inboxd_edge_*`, and the `/metrics` listener (`[metrics] listen`).

Labels are bounded: a route's name comes from the routes file; status,
outcome, signature-failure reason, handshake kind and close reason are small
fixed sets; an ignored event type comes from a signed body, and each route
keeps at most MAX_TYPES_PER_ROUTE of them, the rest counted as "(other)".
Under `--workers N` every process writes prometheus_client's multiprocess
files and the parent serves them all on one listener (inboxd_edge.workers).
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.multiprocess import MultiProcessCollector

from inboxd_edge.edge_limits import ConnectionGuard, GuardedServer
from inboxd_edge.ops_settings import LimitsSettings

MAX_TYPES_PER_ROUTE = 50
# A metrics scraper is one caller or two: a handful of connections is plenty.
_METRICS_LIMITS = LimitsSettings(header_timeout_seconds=10.0, body_timeout_seconds=10.0, max_connections=32)

REQUESTS = Counter(
    "inboxd_edge_requests",
    'Requests answered, by route ("" when no route matched), HTTP status and outcome.',
    ["route", "status", "outcome"],
)
SIGNATURE_FAILURES = Counter(
    "inboxd_edge_signature_failures",
    "Requests refused 401 by the signature check, by route and reason "
    "(missing, malformed, timestamp, mismatch, client_state, other).",
    ["route", "reason"],
)
HANDSHAKES = Counter(
    "inboxd_edge_handshakes",
    "Provider handshakes answered (never stored as events), by route and kind.",
    ["route", "kind"],
)
IGNORED_TYPES = Counter(
    "inboxd_edge_ignored_types",
    'Signed deliveries of a type the route does not list, answered 200 and not stored (other_types = "ignore").',
    ["route", "type"],
)
FORWARD_SECONDS = Histogram(
    "inboxd_edge_forward_seconds",
    "Time from a verified delivery to inboxd's answer to its Accept, by route.",
    ["route"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
CONNECTIONS_CLOSED = Counter(
    "inboxd_edge_connections_closed_early",
    "Connections the edge closed itself: header_timeout (headers not in within [limits] header_timeout_seconds), "
    "evicted (the oldest waiting one, to make room at the cap), over_cap (every slot carried a request).",
    ["reason"],
)
OPEN_CONNECTIONS = Gauge(
    "inboxd_edge_open_connections", "Connections open on the edge's listener.", multiprocess_mode="livesum"
)
RELOADS = Counter(
    "inboxd_edge_route_reloads", "Route file reloads on SIGHUP, by result (applied, refused).", ["result"]
)

_types_seen: defaultdict[str, set[str]] = defaultdict(set)


def route_ready(route: str) -> None:
    """Starts the route's request counter at 0, so a route that never hears from its provider has a series."""
    REQUESTS.labels(route, "200", "accepted")


def count_request(route: str, status: int, outcome: str) -> None:
    REQUESTS.labels(route, str(status), outcome).inc()


def count_signature_failure(route: str, message: str) -> None:
    """`message`: the SignatureError's text, boiled down to a reason from a fixed set."""
    SIGNATURE_FAILURES.labels(route, signature_failure_reason(message)).inc()


def count_handshake(route: str, kind: str) -> None:
    """One handshake answered on `route`; `kind` is the provider's (e.g. "slack", "meta", "github-ping")."""
    HANDSHAKES.labels(route, kind).inc()


def count_ignored_type(route: str, event_type: str) -> None:
    """A signed delivery of a type `route` does not list, ignored (200, nothing stored)."""
    seen = _types_seen[route]
    if event_type not in seen and len(seen) >= MAX_TYPES_PER_ROUTE:
        event_type = "(other)"
    else:
        seen.add(event_type)
    IGNORED_TYPES.labels(route, event_type).inc()


def observe_forward(route: str, seconds: float) -> None:
    FORWARD_SECONDS.labels(route).observe(seconds)


def count_closed_early(reason: str) -> None:
    CONNECTIONS_CLOSED.labels(reason).inc()


def set_open_connections(count: int) -> None:
    OPEN_CONNECTIONS.set(count)


def count_reload(result: str) -> None:
    RELOADS.labels(result).inc()


def signature_failure_reason(message: str) -> str:
    """A label from a SignatureError's message, which names the failure in words of its own."""
    text = message.lower()
    for word, reason in (
        ("missing", "missing"),
        ("malformed", "malformed"),
        ("tolerance", "timestamp"),
        ("timestamp", "timestamp"),
        ("clientstate", "client_state"),
        ("client_state", "client_state"),
        ("no matching", "mismatch"),
        ("mismatch", "mismatch"),
    ):
        if word in text:
            return reason
    return "other"


def registry() -> CollectorRegistry:
    """This process's registry, or every worker's counters when the parent reads the multiprocess folder."""
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if folder:
        combined = CollectorRegistry()
        MultiProcessCollector(combined, path=str(Path(folder)))  # type: ignore[no-untyped-call]
        return combined
    return REGISTRY


async def start_metrics(listen: str) -> tuple[web.BaseRunner, int]:
    """Serves GET /metrics on `listen` (host:port; port 0 picks one); returns the runner and the bound port."""
    source = registry()

    async def metrics(_: web.BaseRequest) -> web.StreamResponse:
        return web.Response(body=generate_latest(source), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def handle(request: web.BaseRequest) -> web.StreamResponse:
        if request.method == "GET" and request.path == "/metrics":
            return await metrics(request)
        return web.Response(status=404, text="only GET /metrics here\n")

    guard = ConnectionGuard(_METRICS_LIMITS)
    runner = web.ServerRunner(GuardedServer(handle, guard=guard), access_log=None)
    await runner.setup()
    host, _, port = listen.rpartition(":")
    site = web.TCPSite(runner, host.strip("[]") or None, int(port))
    await site.start()
    return runner, int(runner.addresses[0][1])
