"""Whether this process exports traces, decided once from the standard `OTEL_*` variables, and the SDK to match.

The rule is the same in every inboxd process (the server, the edge, the Python
and Node runtimes): export is on only when `OTEL_TRACES_EXPORTER` names an
exporter other than `none`, or, when that is unset, when
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set;
`OTEL_SDK_DISABLED=true` is always off. Everything else (sampler, resource,
batch processor, the exporter's endpoint, headers, timeout, TLS) is the SDK's
own reading of the standard variables.

Off must cost nothing: `TRACER` stays None, the SDK is never imported, and
every place that would make a span tests that one module attribute first
instead of calling a no-op tracer (a no-op span is still an object and an
attribute dict per call on the hot path).

Each server process sets up its own provider: under `--workers N` the
children are fresh interpreters (never forked), and a batch processor's
export thread would not survive a fork anyway.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from opentelemetry.trace import Tracer

import inboxd

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

# The tracer every inboxd span comes from; None: tracing is off in this process.
TRACER: Tracer | None = None
_provider: TracerProvider | None = None

DEFAULT_SERVICE_NAME = "inboxd"
EXPORTERS = ("otlp", "console")
# OTLP's protocols inboxd can speak, and the package each needs.
_PROTOCOL_PACKAGES = {
    "grpc": "opentelemetry.exporter.otlp.proto.grpc",
    "http/protobuf": "opentelemetry.exporter.otlp.proto.http",
}
_PROTOCOL_DISTRIBUTIONS = {
    "grpc": "opentelemetry-exporter-otlp-proto-grpc",
    "http/protobuf": "opentelemetry-exporter-otlp-proto-http",
}

# The variables this module reads itself; the SDK reads the rest (docs/configuration.md lists them all).
SDK_DISABLED = "OTEL_SDK_DISABLED"
TRACES_EXPORTER = "OTEL_TRACES_EXPORTER"
TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
TRACES_PROTOCOL = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
PROTOCOL = "OTEL_EXPORTER_OTLP_PROTOCOL"


class TracingSettingsError(ValueError):
    """An `OTEL_*` variable this process cannot honour; the message names it. Refused at start, never later."""


@dataclass(frozen=True, slots=True)
class TracingPlan:
    """What the variables ask for: the exporters, and OTLP's protocol when one of them is `otlp`."""

    exporters: tuple[str, ...]
    protocol: str = "grpc"


def _set(environ: Mapping[str, str], name: str) -> str:
    return environ.get(name, "").strip()


def tracing_plan(environ: Mapping[str, str] | None = None) -> TracingPlan | None:
    """The plan the variables make, None when tracing is off; raises TracingSettingsError naming a bad variable."""
    env = os.environ if environ is None else environ
    if _set(env, SDK_DISABLED).lower() == "true":
        return None
    named = _set(env, TRACES_EXPORTER)
    if named:
        exporters: list[str] = []
        for name in (part.strip().lower() for part in named.split(",")):
            if name and name not in (*EXPORTERS, "none"):
                raise TracingSettingsError(
                    f"{TRACES_EXPORTER}={named!r}: unknown exporter {name!r}; inboxd exports with"
                    f" {' or '.join(EXPORTERS)} (or none)"
                )
            if name and name != "none" and name not in exporters:
                exporters.append(name)
    elif _set(env, TRACES_ENDPOINT) or _set(env, ENDPOINT):
        exporters = ["otlp"]
    else:
        return None
    if not exporters:
        return None
    if "otlp" not in exporters:
        return TracingPlan(tuple(exporters))
    variable = TRACES_PROTOCOL if _set(env, TRACES_PROTOCOL) else PROTOCOL
    protocol = _set(env, variable) or "grpc"
    if protocol not in _PROTOCOL_PACKAGES:
        raise TracingSettingsError(
            f"{variable}={protocol!r}: inboxd exports OTLP over {' or '.join(_PROTOCOL_PACKAGES)}"
        )
    if not _installed(_PROTOCOL_PACKAGES[protocol]):
        raise TracingSettingsError(
            f"{variable}={protocol}: needs the {_PROTOCOL_DISTRIBUTIONS[protocol]} package, which is not"
            " installed: install it, or export over grpc"
        )
    return TracingPlan(tuple(exporters), protocol)


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def start_tracing(plan: TracingPlan | None, default_service_name: str = DEFAULT_SERVICE_NAME) -> None:
    """Sets this process's tracer up for `plan` (None: nothing happens, tracing stays off).

    The SDK reads the sampler, the resource and the batch processor's
    variables itself; the service name is `default_service_name` unless
    OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES name one.
    """
    if plan is None:
        return
    from opentelemetry.sdk.resources import SERVICE_NAME, OTELResourceDetector, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    named = SERVICE_NAME in OTELResourceDetector().detect().attributes
    resource = Resource.create({} if named else {SERVICE_NAME: default_service_name})
    # Shut down by stop_tracing at the server's stop, not at interpreter exit (which would flush twice).
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    for name in plan.exporters:
        provider.add_span_processor(BatchSpanProcessor(_exporter(name, plan.protocol)))
    use_provider(provider)


def _exporter(name: str, protocol: str) -> SpanExporter:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        # stderr, beside the logs: a --workers child's stdout is its pipe to the parent.
        return ConsoleSpanExporter(out=sys.stderr)
    if protocol == "http/protobuf":  # pragma: no cover - only with that optional package installed
        http = importlib.import_module("opentelemetry.exporter.otlp.proto.http.trace_exporter")
        exporter: SpanExporter = http.OTLPSpanExporter()
        return exporter
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def use_provider(provider: TracerProvider, processor: SpanProcessor | None = None) -> None:
    """Makes `provider` the source of every inboxd span (for tests: with `processor` added, an in-memory one)."""
    global TRACER, _provider  # noqa: PLW0603 - the one switch the whole process reads
    if processor is not None:
        provider.add_span_processor(processor)
    _provider = provider
    TRACER = provider.get_tracer("inboxd", inboxd.__version__)


def stop_tracing() -> None:
    """Flushes what the batch processors hold and shuts the provider down; tracing is off afterwards."""
    global TRACER, _provider
    provider, _provider, TRACER = _provider, None, None
    if provider is not None:
        provider.force_flush()
        provider.shutdown()
