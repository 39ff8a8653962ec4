"""The application's tracer provider for the client's tracing tests: the real SDK, spans kept in memory.

OpenTelemetry's global provider can be set once per process, so it is set on
first use and shared; each test clears the exporter and reads only the spans
of `inboxd_client`'s scope (the server, in this same process, may trace into
the same provider).
"""

from __future__ import annotations

import asyncio
import os
import sys

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from inboxd_client.tracing import SCOPE

_exporter: InMemorySpanExporter | None = None


def app_exporter() -> InMemorySpanExporter:
    """The in-memory exporter of the process's provider, installed as the application's on first use."""
    global _exporter  # noqa: PLW0603 - one per process, as the global provider is
    if _exporter is None:
        exporter = InMemorySpanExporter()
        provider = trace.get_tracer_provider()
        if not isinstance(provider, TracerProvider):
            provider = TracerProvider()
            trace.set_tracer_provider(provider)
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        _exporter = exporter
    return _exporter


def worker_spans(exporter: InMemorySpanExporter, name: str | None = None) -> list[ReadableSpan]:
    """The finished spans the client's runtime made (`name`: only those), oldest first."""
    spans = [
        span
        for span in exporter.get_finished_spans()
        if span.instrumentation_scope is not None and span.instrumentation_scope.name == SCOPE
    ]
    return [span for span in spans if name is None or span.name == name]


async def run_script(script: str, *args: str, **otel: str) -> tuple[str, str]:
    """Runs `script` in a Python process of its own, with `otel` as its only OTEL_* variables; its stdout and
    stderr, once it exited 0 (the test fails otherwise, showing its stderr)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")} | otel
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env
    )
    stdout, stderr = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, stderr.decode()
    return stdout.decode(), stderr.decode()
