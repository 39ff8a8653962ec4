"""Assembles the gRPC server: servicers, health, reflection, and a clean shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2
from grpc_reflection.v1alpha import reflection
from grpc_reflection.v1alpha._async import ReflectionServicer

import inboxd
from inboxd.api.admin_servicer import AdminServicer
from inboxd.api.admission import receive_limits
from inboxd.api.handlers import generic_handler
from inboxd.api.inbox_servicer import MAX_BATCH_EVENTS, InboxServicer
from inboxd.api.open_services import OpenServices
from inboxd.background.duties import Operations
from inboxd.background.presence import PresenceWriter
from inboxd.config.settings import ConfigError, Settings
from inboxd.config.tokens import TokenRegistry
from inboxd.console import start_console
from inboxd.domain.errors import Unavailable
from inboxd.domain.validation import MAX_METADATA_BYTES
from inboxd.serving.connections import connection_options, install_out_of_descriptors_log
from inboxd.serving.keepalive import keepalive_options
from inboxd.serving.stranger_connections import StrangerConnections
from inboxd.serving.tls_reload import ServerCertificates
from inboxd.serving.tokens_admin import token_expiry_gauges
from inboxd.store.database import Database
from inboxd.store.notifications import ReplicaSignals
from inboxd.store.settings_check import warn_if_not_durable
from inboxd.usecases.inbox import Clock, Inbox, database_clock
from inboxd_client.v1 import admin_pb2, inbox_pb2

log = logging.getLogger(__name__)

INBOX_SERVICE = inbox_pb2.DESCRIPTOR.services_by_name["InboxService"]
ADMIN_SERVICE = admin_pb2.DESCRIPTOR.services_by_name["InboxAdminService"]
SERVICE_NAMES = (INBOX_SERVICE.full_name, ADMIN_SERVICE.full_name)
HEALTH_PROBE_INTERVAL = 5.0
# After grpc's stop: how long the Work streams it cut off may take to close (and release what they hold).
STREAMS_CLOSE_WITHIN = 5.0
# The trailer every health Check answers with: a probe (`grpcurl -v`, `buf curl -v`) learns which inboxd runs.
VERSION_TRAILER = "inboxd-version"


# The most one message may be: an AcceptBatch's events share it, and a bigger
# batch is refused by grpc itself (RESOURCE_EXHAUSTED), and is split. Every
# other method has a smaller limit of its own (`api.admission.receive_limits`),
# and a call without a valid token is refused before its message is read.
MAX_BATCH_TOTAL_BYTES = 32 * 1024 * 1024
# grpc takes message limits as a C int.
_GRPC_MAX_SIZE = 2**31 - 1


def one_event_bytes(settings: Settings) -> int:
    """An Accept at the payload limit, with its metadata and identity fields."""
    return settings.max_payload_bytes + MAX_METADATA_BYTES + 8 * 1024 + 64 * 1024


def max_message_bytes(settings: Settings) -> int:
    """The batch total, or one event at the payload limit with its metadata if that is larger.

    Raises ConfigError for a size grpc cannot take.
    """
    size = max(MAX_BATCH_TOTAL_BYTES, one_event_bytes(settings))
    if size > _GRPC_MAX_SIZE:
        raise ConfigError(
            f"INBOXD_MAX_PAYLOAD_BYTES={settings.max_payload_bytes} makes a message of {size} bytes,"
            f" beyond the {_GRPC_MAX_SIZE} grpc can take"
        )
    return size


def worker_health_name(index: int) -> str:
    """The health-check name only server process `index` answers SERVING to, under --workers N.

    The kernel hands each connection to one process; checking this name on a
    channel tells which process that channel's connection reached.
    """
    return f"inboxd.worker.{index}"


def server_options(settings: Settings, *, reuse_port: bool = False) -> list[tuple[str, int]]:
    """`reuse_port`: several server processes bind the same port (SO_REUSEPORT), under --workers N."""
    size = max_message_bytes(settings)
    # Answers are this server's own (Claim's events, GetEvent), not a caller's bytes: only clamped to grpc's int.
    send = min(MAX_BATCH_EVENTS * size, _GRPC_MAX_SIZE)
    return [
        # Bursts of thousands of concurrent calls (and thousands of waiting
        # long-polls) would otherwise be cancelled by grpc's default limits.
        ("grpc.server.max_pending_requests", 100_000),
        ("grpc.server.max_pending_requests_hard_limit", 200_000),
        ("grpc.max_receive_message_length", size),
        ("grpc.max_send_message_length", send),
        ("grpc.so_reuseport", 1 if reuse_port else 0),
        # No BDP probing: on a connection that carries data it grows every
        # stream's window from HTTP/2's 64 KiB to megabytes, and a refused
        # stranger's body (api/admission.py) is buffered up to that window. A
        # call whose message is read still gets a window the size of its
        # message: grpc opens it when the handler asks for the message.
        # (tests/integration/test_stream_windows.py)
        ("grpc.http2.bdp_probe", 0),
        *connection_options(settings),
        *keepalive_options(settings),
    ]


class VersionedHealth(health.aio.HealthServicer):  # type: ignore[misc,name-defined]  # untyped upstream
    """gRPC health checking whose Check answers name the running version in their trailers.

    On health alone: it costs the RPCs that carry the work nothing.
    """

    async def Check(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        context.set_trailing_metadata(((VERSION_TRAILER, inboxd.__version__),))
        return await super().Check(request, context)


@dataclass
class RunningServer:
    """A started server; `port` is the one actually bound (listen may say :0)."""

    server: grpc.aio.Server
    port: int
    inbox: Inbox
    health: Any  # grpc_health.v1.health.aio.HealthServicer, untyped upstream
    # Metrics, stats gauges, retention and the operators' use cases.
    ops: Operations | None = None
    # Writes this process's live Work streams to PostgreSQL, for Stats' connected workers.
    presence: PresenceWriter | None = None
    # The names health checking answers for: the whole server, its services, and the worker's own.
    health_names: tuple[str, ...] = ("", *SERVICE_NAMES)
    # The web console's bound port (INBOXD_CONSOLE_LISTEN may say :0); None without it.
    console_port: int | None = None
    # The TLS certificate, read again on SIGHUP (serving.tls_reload); None without TLS.
    certificates: ServerCertificates | None = None
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    async def stop(self, grace: float) -> None:
        """Stops taking calls, lets in-flight ones finish within `grace` seconds."""
        for service in self.health_names:
            await self.health.set(service, health_pb2.HealthCheckResponse.NOT_SERVING)
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        # Work streams are told (`draining`) and push no more; each ends (UNAVAILABLE: reconnect) once its
        # worker settled what it holds, or at the grace's end, which releases what it still holds.
        self.inbox.streams.drain(grace)
        # Waiting Claims hold no event: they answer now, so an idle long-poll does not hold the stop.
        self.inbox.end_waits()
        await self.server.stop(grace)
        # The Work streams the stop cut off give back their claims in the background: at once, not a lease later.
        await self.inbox.streams.closed(live_within=STREAMS_CLOSE_WITHIN)
        for close in self._closers:
            await close()


async def start_server(
    settings: Settings,
    db: Database,
    *,
    clock: Clock = database_clock,
    registry: TokenRegistry | None = None,
    worker_index: int | None = None,
) -> RunningServer:
    """Starts serving on settings.listen; `registry` None means no tokens (loopback only).

    `worker_index` makes this one of several server processes on one port
    (--workers N): it binds with SO_REUSEPORT and leaves the instance's
    duties (gauges, retention, /metrics) to the parent.
    """
    install_out_of_descriptors_log(asyncio.get_running_loop())
    inbox = Inbox(db, settings, clock)
    inbox.fallback_poll_seconds = settings.fallback_poll.total_seconds()
    ops = Operations.for_inbox(inbox, instance_duties=worker_index is None)
    if ops.duties is not None:
        ops.duties.registry.register(token_expiry_gauges(registry))
    # First, so an unsafe INBOXD_CONSOLE_LISTEN is refused before anything serves.
    # (Under --workers N the parent serves the console: its children get none.)
    console = await start_console(settings, ops.operators, registry)
    # No interceptor: inboxd's own generic handlers admit a call on its metadata
    # (api.admission; health and reflection in api.open_services).
    server = grpc.aio.server(options=server_options(settings, reuse_port=worker_index is not None))
    inbox.signals = ReplicaSignals(db.conninfo, inbox.on_replica_signal)
    inbox.signals.start()
    limits = receive_limits(max_message_bytes(settings), one_event_bytes(settings))
    observe = ops.metrics.observe_rpc
    strangers = stranger_connections(settings, registry)
    seen = None if strangers is None else strangers.seen
    health_servicer = VersionedHealth()
    reflected = (*SERVICE_NAMES, health.SERVICE_NAME, reflection.SERVICE_NAME)
    server.add_generic_rpc_handlers(
        (
            generic_handler(
                INBOX_SERVICE,
                InboxServicer(inbox),
                observe,
                registry,
                limits,
                seen=seen,
                max_streams_per_caller=settings.max_streams_per_caller,
            ),
            generic_handler(ADMIN_SERVICE, AdminServicer(ops.operators), observe, registry, limits, seen=seen),
            # Not grpc's own handlers: those read a stranger's message in full, up to 32 MiB, however many at once.
            OpenServices(health_servicer, ReflectionServicer(reflected), registry, seen),
        )
    )
    certificates = server_certificates(settings)
    if certificates is None:
        port = server.add_insecure_port(settings.listen)
    else:
        port = server.add_secure_port(settings.listen, certificates.credentials())
    if port == 0:
        raise RuntimeError(f"could not listen on {settings.listen}")
    await server.start()
    running = RunningServer(server, port, inbox, health_servicer, ops=ops, certificates=certificates)
    if strangers is not None:
        strangers.port = port
        strangers.start()
        running._closers.append(strangers.stop)
    if worker_index is not None:
        running.health_names += (worker_health_name(worker_index),)
    running._closers.append(inbox.signals.stop)
    # After the streams closed (stop() waits for them first): the last write clears this process's rows.
    running.presence = PresenceWriter(inbox)
    running.presence.start()
    running._closers.append(running.presence.stop)
    await ops.start()
    running._closers.append(ops.stop)
    if console is not None:
        running.console_port = console.port
        running._closers.append(console.stop)
    await warn_if_not_durable(db)
    await _report_health(running, db)
    running._tasks.append(asyncio.create_task(_watch_health(running, db)))
    return running


def stranger_connections(settings: Settings, registry: TokenRegistry | None) -> StrangerConnections | None:
    """The rule that closes connections no valid token used (INBOXD_UNAUTHENTICATED_CONNECTION_AGE); None: off."""
    bound = settings.unauthenticated_connection_age.total_seconds()
    if registry is None or bound <= 0:
        return None  # without tokens every caller is let in, on loopback only
    return StrangerConnections(0, bound)


def freeze_start_up_objects() -> None:
    """Leaves the objects made at start-up (modules, classes, stubs: some 60,000) out of later garbage collections.

    A full collection walks every tracked object: over those alone it holds the
    event loop for tens of milliseconds, and whatever waits (a woken Claim's
    answer, say) waits that long. They live as long as the process anyway.
    For a serving process only, not for a test process that starts many servers.
    """
    gc.collect()
    gc.freeze()


def server_certificates(settings: Settings) -> ServerCertificates | None:
    """TLS from INBOXD_TLS_CERT/_KEY, read again on reload(); with INBOXD_TLS_CLIENT_CA, mutual TLS. None: no TLS.

    Raises ConfigError for a file it cannot read or a certificate and key that are not a pair.
    """
    if settings.tls_cert is None or settings.tls_key is None:
        return None
    return ServerCertificates(settings.tls_cert, settings.tls_key, settings.tls_client_ca)


async def _report_health(running: RunningServer, db: Database) -> None:
    """SERVING while the database answers (the schema is migrated before start)."""
    try:
        await db.ping()
        status = health_pb2.HealthCheckResponse.SERVING
    except Unavailable:
        status = health_pb2.HealthCheckResponse.NOT_SERVING
    for service in running.health_names:
        await running.health.set(service, status)


async def _watch_health(running: RunningServer, db: Database) -> None:
    while True:
        await asyncio.sleep(HEALTH_PROBE_INTERVAL)
        try:
            await _report_health(running, db)
        except Exception:
            log.exception("health probe failed")
