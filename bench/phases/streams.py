"""Accept over AcceptStream beside unary Accept, both from this process's grpc.aio clients (issue 27's first figures).

64 items in flight on 4 streams (16 callers sharing each, one connection per
stream, as edges would) against unary Accept at 64 callers. Both sides use the
same Python generator, so the ratio compares the server's costs and not two
generators; the generator's own CPU per event is in each figure
(`generator_cpu_us_per_op`), and the server's CPU per event in
`extra["streams"]`. A server without AcceptStream leaves the stream figure out.
"""

from __future__ import annotations

import contextlib
import logging

from bench import grpc_load
from bench.loop import Step
from bench.record import server_us_per
from bench.run import Run
from bench.workload import EVENT_TYPE, PAYLOAD_BYTES, Keys
from inboxd_client import AcceptStream, AsyncInboxClient
from inboxd_client.v1 import inbox_pb2

log = logging.getLogger("bench")

STREAMS_NS = "bench/streams"
IN_FLIGHT = 64
STREAMS = 4
UNARY = f"inboxd.accept_unary_py.c{IN_FLIGHT}"
STREAMED = f"inboxd.accept_stream.s{STREAMS}.c{IN_FLIGHT}"


def _stream_steps(streams: list[AcceptStream], keys: Keys) -> list[Step]:
    def step_on(stream: AcceptStream) -> Step:
        async def step() -> int:
            key = keys.next()
            request = inbox_pb2.AcceptRequest(
                namespace=STREAMS_NS, event_key=key, event_type=EVENT_TYPE, payload=PAYLOAD_BYTES
            )
            await stream.accept_request(request)
            return 1

        return step

    return [step_on(streams[i % len(streams)]) for i in range(IN_FLIGHT)]


async def streams_phase(run: Run) -> None:
    if "AcceptStreamRequest" not in inbox_pb2.DESCRIPTOR.message_types_by_name:
        log.info("streams: these stubs have no AcceptStream; skipped")
        return
    async with grpc_load.stubs(run.target) as [stub]:
        steps = grpc_load.accept_steps(stub, IN_FLIGHT, STREAMS_NS, Keys("accept-unary-py"))
        await run.measure_steps(UNARY, steps, "tx/s")
    async with contextlib.AsyncExitStack() as stack:
        streams = []
        for _ in range(STREAMS):
            client = await stack.enter_async_context(AsyncInboxClient(run.target, timeout=60.0))
            streams.append(await stack.enter_async_context(client.accept_stream()))
        await run.measure_steps(STREAMED, _stream_steps(streams, Keys("accept-stream")), "tx/s")
    unary, streamed = run.figures[UNARY], run.figures[STREAMED]
    summary = {
        "ratio_to_unary": round(streamed["value"] / unary["value"], 2) if unary["value"] else None,
        "server_us_per_event_stream": _rounded(server_us_per(streamed)),
        "server_us_per_event_unary": _rounded(server_us_per(unary)),
        "generator_us_per_event_stream": streamed.get("generator_cpu_us_per_op"),
    }
    run.extra["streams"] = summary
    log.info("streams: %s", summary)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
