"""A worker's stop never blocks its event loop on a tracing flush, however long the collector takes to fail.

The provider a worker installed is shut down at its stop: the batch processor
exports what it holds, and an OTLP exporter retries an unreachable collector
until its timeout. That runs off the event loop, so the application's other
tasks (a web server beside the worker, another worker) keep running meanwhile.
"""

from __future__ import annotations

import json
import socket

from inboxd.serving.server import RunningServer
from inboxd_client import AsyncInboxClient
from tests.client.helpers import accept
from tests.client.tracing_support import run_script

# A worker process whose OTLP collector never answers: it handles one event (a span to export) and
# stops; it says how long its stop took and the longest its event loop went without running a ticker.
STOPPING = """
import asyncio, json, sys, time
from inboxd_client import AsyncInboxClient, EventContext, Worker, tracing

async def main(target: str, namespace: str) -> None:
    ticks = [time.monotonic()]
    async def tick() -> None:
        while True:
            await asyncio.sleep(0.02)
            ticks.append(time.monotonic())

    async with AsyncInboxClient(target) as client:
        stopped_at = []
        async def handle(ctx: EventContext) -> None:
            stopped_at.append(time.monotonic())
            worker.stop()

        worker = Worker(client, handle, namespaces=[namespace], concurrency=1, wait=1.0)
        ticker = asyncio.create_task(tick())
        await worker.run(handle_signals=False)
        ticks.append(time.monotonic())
        stop_took = ticks[-1] - stopped_at[0]
        ticker.cancel()
    longest_gap = max(later - earlier for earlier, later in zip(ticks, ticks[1:]))
    print(json.dumps({"stop_took": stop_took, "longest_gap": longest_gap, "traced_after": tracing.TRACER is not None}))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""

EXPORT_TIMEOUT_S = 3


async def test_a_worker_stopping_with_an_unreachable_collector_keeps_its_event_loop_running(
    server: RunningServer, client: AsyncInboxClient, ns: str
) -> None:
    await accept(client, ns, "k")
    # A collector that takes the connection and never answers: every export waits out the exporter's timeout.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    port = silent.getsockname()[1]
    try:
        stdout, _ = await run_script(
            STOPPING,
            f"127.0.0.1:{server.port}",
            ns,
            OTEL_TRACES_EXPORTER="otlp",
            OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
            OTEL_EXPORTER_OTLP_TIMEOUT=str(EXPORT_TIMEOUT_S),
        )
    finally:
        silent.close()
    said = json.loads(stdout.strip().splitlines()[-1])
    assert said["traced_after"] is False
    # The flush was tried, and took most of the exporter's timeout ...
    assert said["stop_took"] >= EXPORT_TIMEOUT_S / 2, said
    # ... while the loop ran on: a ticker every 20 ms never waited half a second.
    assert said["longest_gap"] < 0.5, said
