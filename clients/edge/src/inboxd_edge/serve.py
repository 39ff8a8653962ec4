"""Starting and stopping a running edge: its gRPC channel to inboxd, its HTTP listener and its tracing."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
import grpc.aio
from aiohttp import web
from opentelemetry.trace import TracerProvider

from inboxd_client.connection import call_metadata
from inboxd_client.plaintext import PlaintextTokenRefused, refuse_plaintext_token, trusted_network_from
from inboxd_edge.app import Clock, build_app
from inboxd_edge.config import ConfigError, EdgeConfig
from inboxd_edge.edge_metrics import start_metrics
from inboxd_edge.forward import Forwarder
from inboxd_edge.front import Front
from inboxd_edge.health import Readiness
from inboxd_edge.inboxd_settings import InboxdSettings
from inboxd_edge.stream_pool import StreamPool
from inboxd_edge.tracing import EdgeTracing, start_tracing, tracing_with

MAX_RECONNECT_BACKOFF_MS = 5000


@dataclass
class RunningEdge:
    """An edge listening on `host`:`port` (port 0 asks the system for a free one)."""

    runner: web.BaseRunner
    channel: grpc.aio.Channel
    forwarder: Forwarder
    host: str
    port: int
    # None: tracing is off.
    tracing: EdgeTracing | None = None
    # The listener's fixed front, whose routes a reload swaps; None only for an edge built otherwise.
    front: Front | None = None
    # How each new routes application is built (a reload's): the forwarder, clock and tracer of this edge.
    build: Callable[[EdgeConfig], web.Application] | None = None
    # /metrics, when [metrics] listen is set (and this process serves it).
    metrics: web.BaseRunner | None = None
    metrics_port: int | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def stop(self) -> None:
        """Stops taking requests, lets those in flight finish, closes the streams and channels, flushes the spans."""
        await self.runner.cleanup()
        if self.front is not None:
            await self.front.routes.cleanup()
        if self.metrics is not None:
            await self.metrics.cleanup()
        await self.forwarder.close()
        await self.channel.close(None)
        if self.tracing is not None:
            await self.tracing.stop()


def open_channel(settings: InboxdSettings, options: Sequence[tuple[str, int]] = ()) -> grpc.aio.Channel:
    """An insecure channel on loopback, or TLS when a CA file is configured."""
    # grpc's reconnect backoff grows to 120 s: an inboxd back after a minute's outage would wait up to two more
    # for the edge to try again, answering 503 (and /readyz 503) meanwhile. 5 s bounds that wait.
    options = [("grpc.max_reconnect_backoff_ms", MAX_RECONNECT_BACKOFF_MS), *options]
    if settings.tls_ca_file:
        credentials = grpc.ssl_channel_credentials(Path(settings.tls_ca_file).read_bytes())
        return grpc.aio.secure_channel(settings.target, credentials, options=options)
    return grpc.aio.insecure_channel(settings.target, options=options)


def build_forwarder(settings: InboxdSettings, channel: grpc.aio.Channel, token: str | None) -> Forwarder:
    """The forwarder `settings.accept_mode` asks for: over a pool of AcceptStreams, or unary Accept only."""
    pool = None
    if settings.accept_mode != "unary":
        try:
            metadata = call_metadata(token)
        except ValueError as exc:
            raise ConfigError(f"[inboxd] {settings.token_env}: {exc}") from exc
        # A subchannel pool of its own per channel: a connection of its own per stream, not one shared by all.
        own_connection = [("grpc.use_local_subchannel_pool", 1)]
        channels = [open_channel(settings, own_connection) for _ in range(settings.accept_streams)]
        pool = StreamPool(channels, metadata, timeout=settings.deadline_seconds)
    return Forwarder(
        channel,
        deadline=settings.deadline_seconds,
        token=token,
        pool=pool,
        fallback=settings.accept_mode == "auto",
    )


async def start_edge(
    config: EdgeConfig,
    *,
    listen: str | None = None,
    environ: Mapping[str, str] = os.environ,
    clock: Clock | None = None,
    tracer_provider: TracerProvider | None = None,
    reuse_port: bool = False,
    serve_metrics: bool = True,
) -> RunningEdge:
    """Opens the channel and starts listening; `listen` overrides the configured address.

    Tracing follows `environ`'s OTEL_* variables (the SDK's provider, made and shut down by the edge), unless
    `tracer_provider` is given: the application's own, which it shuts down itself. `reuse_port`: one of
    several processes on the port (--workers); `serve_metrics` False: the parent serves /metrics for them.
    """
    host, _, port = (listen or config.listen).rpartition(":")
    token = environ.get(config.inboxd.token_env) or None
    try:
        refuse_plaintext_token(
            config.inboxd.target,
            token=token,
            tls=bool(config.inboxd.tls_ca_file),
            trusted_network=config.inboxd.trusted_network or trusted_network_from(environ),
        )
    except PlaintextTokenRefused as exc:
        raise ConfigError(f"[inboxd] {exc}") from exc
    # Before anything opens: an exporter the edge cannot export with is refused at start.
    tracing = tracing_with(tracer_provider) if tracer_provider is not None else start_tracing(environ)
    try:
        channel = open_channel(config.inboxd)
        forwarder = build_forwarder(config.inboxd, channel, token)
        tracer = tracing.tracer if tracing is not None else None

        def build(routes_config: EdgeConfig) -> web.Application:
            return build_app(routes_config, forwarder, clock=clock or time.time, tracer=tracer)

        front = Front(await routes_runner(build(config)), Readiness(channel), config.ops.limits)
        # The edge logs its own one line per request; aiohttp's access log would repeat it.
        runner = web.ServerRunner(front.server)
        await runner.setup()
        site = web.TCPSite(runner, host or "127.0.0.1", int(port), reuse_port=reuse_port or None)
        await site.start()
        metrics, metrics_port = None, None
        if serve_metrics and config.ops.metrics.listen:
            metrics, metrics_port = await start_metrics(config.ops.metrics.listen)
    except BaseException:
        if tracing is not None:
            await tracing.stop()
        raise
    bound = runner.addresses[0]
    return RunningEdge(
        runner, channel, forwarder, str(bound[0]), int(bound[1]), tracing, front, build, metrics, metrics_port
    )


async def routes_runner(app: web.Application) -> web.AppRunner:
    """`app` started (frozen, its start-up run) to be the front's routes; it never listens itself."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    return runner
