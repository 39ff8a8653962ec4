"""Whether a worker traces, and with which OpenTelemetry tracer: the on/off rule and the provider's set-up.

OpenTelemetry is optional (`pip install 'inboxd-client[tracing]'`), so
nothing here imports it before a Worker starts. The rule, the same in every
inboxd process: export is on only when `OTEL_TRACES_EXPORTER` names an
exporter other than `none` or, when that is unset, when
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set;
`OTEL_SDK_DISABLED=true` is always off. An application that installed a
tracer provider of its own keeps it: the worker traces into it and installs
nothing. Everything else (sampler, resource, batching, the exporter's
endpoint) is the SDK's own reading of the standard variables.

`TRACER` is the one check on the hot path: None means off, and then no SDK
object, span or attribute dict is made for an event.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

from inboxd_client._version import __version__

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Tracer

log = logging.getLogger(__name__)

SCOPE = "inboxd_client"
KNOWN_EXPORTERS = ("otlp", "console")
OTLP_PROTOCOLS = ("grpc", "http/protobuf")
INSTALL_HINT = "pip install 'inboxd-client[tracing]'"

# The worker's tracer while one runs with tracing on; None: off (read by every event's run).
TRACER: Tracer | None = None
_users = 0  # workers running now: the first sets TRACER up, the last takes it down
_ours: TracerProvider | None = None  # the provider this module installed, if it did
# Providers installed here and shut down since: the global one can be set only once per process.
_retired: list[object] = []


class TracingConfigError(ValueError):
    """An OTEL_* variable asks for what this process cannot do; the message names the variable."""


def exporters_from_env(env: Mapping[str, str]) -> tuple[str, ...]:
    """The exporters the rule turns on (`()`: off); raises TracingConfigError for a name it does not know."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return ()
    named = env.get("OTEL_TRACES_EXPORTER", "").strip()
    if not named:
        # Unset (an empty value counts as unset, as OpenTelemetry's own readers take it).
        endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "")
        return ("otlp",) if endpoint.strip() else ()
    names = [name.strip().lower() for name in named.split(",") if name.strip()]
    unknown = [name for name in names if name not in (*KNOWN_EXPORTERS, "none")]
    if unknown:
        raise TracingConfigError(
            f"OTEL_TRACES_EXPORTER={named!r}: {', '.join(unknown)} is not an exporter inboxd_client knows"
            f" (otlp, console or none)"
        )
    return tuple(dict.fromkeys(name for name in names if name != "none"))


def otlp_protocol(env: Mapping[str, str]) -> tuple[str, str]:
    """The OTLP exporter's protocol and the variable that chose it; raises TracingConfigError for another."""
    for variable in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        value = env.get(variable, "").strip()
        if value:
            if value not in OTLP_PROTOCOLS:
                raise TracingConfigError(f"{variable}={value!r}: inboxd_client exports OTLP as grpc or http/protobuf")
            return value, variable
    return "grpc", "OTEL_EXPORTER_OTLP_PROTOCOL"


def start(env: Mapping[str, str] | None = None) -> None:
    """A worker starts: sets TRACER by the rule (on its first user); raises TracingConfigError for a bad setting."""
    global TRACER, _users  # noqa: PLW0603 - the module-level switch the hot path reads
    exporters = exporters_from_env(os.environ if env is None else env)
    _users += 1
    if _users > 1:
        return
    try:
        TRACER = _tracer(exporters, os.environ if env is None else env)
    except BaseException:
        _users -= 1
        raise


def stop() -> None:
    """A worker stopped: the last one flushes and shuts down the provider this module installed, if any."""
    provider = detach()
    if provider is not None:
        provider.shutdown()


def detach() -> TracerProvider | None:
    """A worker stopped: the last one turns tracing off; the provider this module installed, for the caller
    to shut down (None: nothing to shut down).

    Shutting down flushes the batch processor, and an OTLP exporter retries an
    unreachable collector until its timeout (10 s by default): a worker does
    it off its event loop (`Worker.run`), so other tasks are not held up.
    """
    global TRACER, _users, _ours  # noqa: PLW0603 - the module-level switch the hot path reads
    if _users == 0:
        return None
    _users -= 1
    if _users:
        return None
    TRACER = None
    provider, _ours = _ours, None
    if provider is not None:
        _retired.append(provider)
    return provider


def _tracer(exporters: tuple[str, ...], env: Mapping[str, str]) -> Tracer | None:
    """The app's provider's tracer, else one of a provider installed here when the rule says on, else None."""
    try:
        from opentelemetry import trace
    except ImportError:
        if exporters:
            log.info("tracing is off: OTEL_* asks for export, but OpenTelemetry is not installed (%s)", INSTALL_HINT)
        return None
    current = trace.get_tracer_provider()
    if not isinstance(current, trace.ProxyTracerProvider) and not any(current is old for old in _retired):
        return current.get_tracer(SCOPE, __version__)  # the application's provider: install nothing
    if not exporters:
        return None
    provider = _provider(exporters, env)
    if provider is None:
        return None
    global _ours  # noqa: PLW0603 - remembered to shut it down with the last worker
    _ours = provider
    if isinstance(current, trace.ProxyTracerProvider):
        trace.set_tracer_provider(provider)  # the application's own spans (an HTTP client's, say) export too
    # Else the global one is a provider an earlier worker installed and shut down (it can be set only
    # once per process): this worker traces into a fresh one of its own.
    return provider.get_tracer(SCOPE, __version__)


def _provider(exporters: tuple[str, ...], env: Mapping[str, str]) -> TracerProvider | None:
    """The SDK's provider with a batch processor per exporter; None (with one INFO line) without the SDK."""
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.info("tracing is off: OTEL_* asks for export, but opentelemetry-sdk is not installed (%s)", INSTALL_HINT)
        return None
    made = [_exporter(name, env) for name in exporters]
    if any(exporter is None for exporter in made):
        return None
    # Sampler, resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES) and OTEL_BSP_*: the SDK reads them itself.
    provider = TracerProvider()
    for exporter in made:
        assert exporter is not None
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def _exporter(name: str, env: Mapping[str, str]) -> SpanExporter | None:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    protocol, variable = otlp_protocol(env)
    if protocol == "http/protobuf":
        try:
            # Not among the extra's packages (so not among mypy's either): imported by name.
            http = importlib.import_module("opentelemetry.exporter.otlp.proto.http.trace_exporter")
        except ImportError:
            raise TracingConfigError(
                f"{variable}=http/protobuf needs opentelemetry-exporter-otlp-proto-http, which is not installed"
                f" (inboxd-client[tracing] brings the grpc exporter: unset {variable} to use it)"
            ) from None
        return cast("SpanExporter", http.OTLPSpanExporter())
    try:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    except ImportError:
        log.info(
            "tracing is off: OTEL_* asks for OTLP export, but opentelemetry-exporter-otlp-proto-grpc is not installed"
            " (%s)",
            INSTALL_HINT,
        )
        return None
    return OTLPSpanExporter()  # endpoint, headers, timeout, insecure: OTEL_EXPORTER_OTLP_* as the SDK reads them
