"""Whether a worker traces: the on/off rule from OTEL_* (unit), and whole worker processes with tracing off and on.

A worker process of its own is the only place to see "no provider": OpenTelemetry's
global provider is set once per process, and this test process has one.
"""

from __future__ import annotations

import importlib.util
import json
from typing import Any

import pytest

from inboxd.serving.server import RunningServer
from inboxd_client import AsyncInboxClient, EventContext, Worker, tracing
from inboxd_client.tracing import TracingConfigError, exporters_from_env, otlp_protocol
from inboxd_client.v1 import inbox_pb2
from tests.client.helpers import accept
from tests.client.recording_proxy import recording_proxy
from tests.client.tracing_support import app_exporter, run_script


@pytest.mark.parametrize(
    ("env", "exporters"),
    [
        ({}, ()),
        ({"OTEL_TRACES_EXPORTER": "none"}, ()),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, ("otlp",)),
        ({"OTEL_TRACES_EXPORTER": "console"}, ("console",)),
        ({"OTEL_TRACES_EXPORTER": "otlp, console"}, ("otlp", "console")),
        ({"OTEL_TRACES_EXPORTER": ""}, ()),  # empty is unset
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, ("otlp",)),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4317"}, ("otlp",)),
        # A named exporter decides, endpoint or not.
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, ()),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, ()),
        ({"OTEL_SDK_DISABLED": "TRUE", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, ()),
        ({"OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "console"}, ("console",)),
    ],
)
def test_the_rule_turns_export_on_only_for_a_named_exporter_or_an_endpoint(
    env: dict[str, str], exporters: tuple[str, ...]
) -> None:
    assert exporters_from_env(env) == exporters


def test_an_unknown_exporter_is_refused_naming_the_variable() -> None:
    with pytest.raises(TracingConfigError, match=r"OTEL_TRACES_EXPORTER='otlp,zipkin': zipkin is not an exporter"):
        exporters_from_env({"OTEL_TRACES_EXPORTER": "otlp,zipkin"})


def test_the_otlp_protocol_is_grpc_unless_a_variable_says_http_protobuf() -> None:
    assert otlp_protocol({}) == ("grpc", "OTEL_EXPORTER_OTLP_PROTOCOL")
    both = {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}
    assert otlp_protocol(both) == ("http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
    with pytest.raises(TracingConfigError, match=r"OTEL_EXPORTER_OTLP_PROTOCOL='http/json'"):
        otlp_protocol({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})


def test_http_protobuf_without_its_exporter_package_is_one_clear_error_naming_the_variable() -> None:
    env = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}
    if importlib.util.find_spec("opentelemetry.exporter.otlp.proto.http") is not None:
        assert tracing._exporter("otlp", env) is not None
        return
    with pytest.raises(TracingConfigError, match=r"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf needs"):
        tracing._exporter("otlp", env)


def test_a_worker_uses_the_applications_provider_and_leaves_it_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry import trace

    app_exporter()  # this process's provider: the application's
    provider = trace.get_tracer_provider()
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")  # on, but the application's provider wins
    tracing.start()
    try:
        assert tracing.TRACER is not None
        assert trace.get_tracer_provider() is provider
    finally:
        tracing.stop()
    assert tracing.TRACER is None  # the last worker stopped: off again


async def test_a_worker_refuses_to_start_on_an_exporter_it_does_not_know(
    client: AsyncInboxClient, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def handle(ctx: EventContext) -> None:
        return None

    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "jaeger")
    with pytest.raises(TracingConfigError, match="OTEL_TRACES_EXPORTER='jaeger'"):
        await Worker(client, handle, namespaces=[ns]).run(handle_signals=False)
    assert tracing.TRACER is None


# A worker process: handles the events, stops after `count`, prints what it saw as its last stdout line.
WORKER = """
import asyncio, json, sys
from opentelemetry import trace
from inboxd_client import AsyncInboxClient, EventContext, PermanentError, Worker, tracing

async def main(target: str, namespace: str, use_streams: bool, count: int) -> None:
    seen = []
    async with AsyncInboxClient(target) as client:
        async def send(key: str) -> str:
            return "msg-1"

        async def handle(ctx: EventContext) -> None:
            seen.append({"traced": tracing.TRACER is not None,
                         "span": trace.get_current_span().get_span_context().is_valid})
            await ctx.run_action("send:v1", send)
            if len(seen) == count:
                worker.stop()
            if ctx.event_key == "boom":
                raise PermanentError("no use for it")

        worker = Worker(client, handle, namespaces=[namespace], concurrency=1, wait=1.0, use_streams=use_streams)
        await worker.run(handle_signals=False)
    print(json.dumps({"seen": seen, "provider": type(trace.get_tracer_provider()).__name__,
                      "traced_after": tracing.TRACER is not None}))

asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3] == "stream", int(sys.argv[4])))
"""


async def run_worker(target: str, ns: str, path: str, count: int, **otel: str) -> tuple[str, str]:
    return await run_script(WORKER, target, ns, path, str(count), **otel)


def json_documents(text: str) -> list[Any]:
    """Every JSON document printed one after another (the console exporter's spans, then the worker's line)."""
    decoder, found, at = json.JSONDecoder(), [], 0
    while (at := text.find("{", at)) != -1:
        document, at = decoder.raw_decode(text, at)
        found.append(document)
    return found


async def test_without_a_provider_or_otel_variables_a_worker_makes_no_spans_and_sends_no_context(
    server: RunningServer, client: AsyncInboxClient, ns: str, worker_path: str
) -> None:
    await accept(client, ns, "k")
    async with recording_proxy(f"127.0.0.1:{server.port}") as proxy:
        stdout, _ = await run_worker(f"127.0.0.1:{proxy.port}", ns, worker_path, 1)
    said = json.loads(stdout.strip().splitlines()[-1])
    assert said == {
        "seen": [{"traced": False, "span": False}],
        "provider": "ProxyTracerProvider",
        "traced_after": False,
    }
    assert proxy.calls and all("traceparent" not in call.metadata for call in proxy.calls)
    work = [inbox_pb2.WorkRequest.FromString(raw) for call in proxy.of("Work") for raw in call.requests]
    assert (len(work) > 2) is (worker_path == "stream")
    assert not any(message.HasField("trace_context") for message in work)


async def test_with_an_exporter_named_a_worker_installs_the_sdk_exports_its_spans_and_flushes_them_at_stop(
    server: RunningServer, client: AsyncInboxClient, ns: str
) -> None:
    await accept(client, ns, "fine")
    await accept(client, ns, "boom")
    stdout, stderr = await run_worker(
        f"127.0.0.1:{server.port}", ns, "stream", 2, OTEL_TRACES_EXPORTER="console", OTEL_SERVICE_NAME="receipts-worker"
    )
    *exported, said = json_documents(stdout)
    assert said["seen"] == [{"traced": True, "span": True}] * 2
    assert (said["provider"], said["traced_after"]) == ("TracerProvider", False)
    processes = [span for span in exported if span["name"] == "process"]
    assert len(processes) == 2 and len([span for span in exported if span["name"] == "action"]) == 2
    assert {span["resource"]["attributes"]["service.name"] for span in exported} == {"receipts-worker"}
    assert all(span["attributes"]["messaging.destination.name"] == ns for span in processes)
    # The runtime's own log line of the failed handler names the failed handler's span.
    (failed,) = [span for span in processes if span["status"]["status_code"] == "ERROR"]
    (line,) = [line for line in stderr.splitlines() if "handler failed" in line]
    ids = failed["context"]
    assert line.endswith(f" trace_id={ids['trace_id'][2:]} span_id={ids['span_id'][2:]}"), line


# The worker of an installation without the extra: every opentelemetry import fails, as if absent.
UNTRACEABLE = """
import asyncio, sys
sys.modules["opentelemetry"] = None  # `import opentelemetry...` now raises ImportError
from inboxd_client import AsyncInboxClient, EventContext, Worker, tracing

async def main(target: str, namespace: str) -> None:
    async with AsyncInboxClient(target) as client:
        async def handle(ctx: EventContext) -> None:
            await ctx.run_action("send:v1", lambda key: asyncio.sleep(0, "msg-1"))
            worker.stop()

        worker = Worker(client, handle, namespaces=[namespace], wait=1.0)
        await worker.run(handle_signals=False)
        print(worker.stats.completed, tracing.TRACER)

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


async def test_without_opentelemetry_installed_a_worker_asked_to_trace_says_so_once_and_works(
    server: RunningServer, client: AsyncInboxClient, ns: str
) -> None:
    await accept(client, ns, "k")
    stdout, stderr = await run_script(UNTRACEABLE, f"127.0.0.1:{server.port}", ns, OTEL_TRACES_EXPORTER="otlp")
    assert stdout.split() == ["1", "None"]
    notes = [line for line in stderr.splitlines() if "tracing is off" in line]
    assert len(notes) == 1 and "pip install 'inboxd-client[tracing]'" in notes[0], stderr
