"""The tracing phase's OTLP/gRPC sink: the collector's TraceService, counting spans and discarding them.

Run as its own process (`python -m bench.otlp_sink`), so its CPU is not the
server's nor this harness's: it prints `listening PORT` once serving; each
`count` line on its stdin is answered with the spans received so far; it
stops at the end of its stdin. It decodes each request (grpc does, as a real
collector would) and keeps nothing but the count.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from collections.abc import AsyncIterator
from concurrent import futures
from dataclasses import dataclass
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc


def span_count(request: trace_service_pb2.ExportTraceServiceRequest) -> int:
    return sum(len(scope.spans) for resource in request.resource_spans for scope in resource.scope_spans)


class CountingTraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.spans = 0
        self.requests = 0
        self._lock = threading.Lock()

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: Any
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        with self._lock:
            self.spans += span_count(request)
            self.requests += 1
        return trace_service_pb2.ExportTraceServiceResponse()


def main() -> None:
    service = CountingTraceService()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(service, server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"listening {port}", flush=True)
    for line in sys.stdin:
        if line.strip() == "count":
            print(f"spans {service.spans} requests {service.requests}", flush=True)
    server.stop(grace=None)


@dataclass
class Sink:
    """A running sink process: its endpoint for OTEL_EXPORTER_OTLP_ENDPOINT, and its count on request."""

    proc: asyncio.subprocess.Process
    port: int

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def spans(self) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(b"count\n")
        await self.proc.stdin.drain()
        line = (await asyncio.wait_for(self.proc.stdout.readline(), 30)).decode().split()
        if len(line) != 4 or line[0] != "spans":
            raise RuntimeError(f"the OTLP sink answered {' '.join(line)!r} to count")
        return int(line[1])


@contextlib.asynccontextmanager
async def otlp_sink() -> AsyncIterator[Sink]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.otlp_sink", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode().split()
        if len(line) != 2 or line[0] != "listening":
            raise RuntimeError(f"the OTLP sink did not start: it said {' '.join(line)!r}")
        yield Sink(proc, int(line[1]))
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            proc.kill()
            await proc.wait()


if __name__ == "__main__":
    main()
