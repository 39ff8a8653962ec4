"""Accept over AcceptStream beside unary Accept, both from the Node generator (issue 27's first figures).

64 items in flight on 4 streams (16 callers sharing each, one connection per
stream, as edges would) against unary Accept at 64 callers on 4 connections.
The same generator frames both (streams.mjs), so the ratio compares the
server's costs; its own CPU per event is in each figure
(`generator_cpu_us_per_op`), and the server's CPU per event in
`extra["streams"]`. A server without AcceptStream leaves the stream figure out.
"""

from __future__ import annotations

import logging

from bench import support
from bench.record import server_us_per
from bench.run import Run

log = logging.getLogger("bench")

STREAMS_NS = "bench/streams"
IN_FLIGHT = 64
STREAMS = 4
UNARY = f"inboxd.accept.c{IN_FLIGHT}"
STREAMED = f"inboxd.accept_stream.s{STREAMS}.c{IN_FLIGHT}"


async def streams_phase(run: Run) -> None:
    missing = support.lacks(run.support, support.ACCEPT_STREAM)
    if missing is not None:
        log.info("streams: not served: %s", missing)
        return
    if UNARY not in run.figures:
        # The accept phase measures it (the same load); run alone, this phase measures it itself.
        load = run.node("accept", IN_FLIGHT, namespace=STREAMS_NS, channels=STREAMS, prefix="accept-unary")
        await run.measure_node(UNARY, load, "tx/s")
    load = run.node("accept_stream", IN_FLIGHT, namespace=STREAMS_NS, channels=STREAMS, prefix="accept-stream")
    await run.measure_node(STREAMED, load, "tx/s")
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
