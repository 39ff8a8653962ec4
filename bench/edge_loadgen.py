"""The edge benchmark's HTTP/1.1 load generator: `python -m bench.edge_loadgen SPEC`, a process of its own.

It signs its deliveries first (bench/edge_requests.py), then opens
`connections` keep-alive connections and keeps one request in flight on
each: a closed loop, each connection sending its next request when the last
is answered. Writing ready bytes and framing answers by Content-Length on
asyncio's Protocol (uvloop when installed) costs a few µs a request, so the
same generator that drives the edge also outruns the bare aiohttp app (the
page shows its CPU per request). Like loadgen.mjs it prints one JSON object a
line: `ready` once signed, `window_start` and `window_end` around the
measured window (the caller samples /proc at those two lines), then `result`.
Only answers inside the window count; any status but 200 is an error.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, cast

from bench.edge_requests import Response, percentile_ms, signed_requests, split_response

# How long the connections may take to finish their last requests after the window.
DRAIN_SECONDS = 10.0


@dataclass(frozen=True)
class Spec:
    host: str
    port: int
    connections: int
    warmup_s: float
    duration_s: float
    deliveries: int
    prefix: str
    secret: str

    @classmethod
    def parse(cls, text: str) -> Spec:
        return cls(**json.loads(text))


class Tally:
    """Answers, latencies and errors over the window, shared by every connection."""

    def __init__(self, requests: list[bytes], window_start: float, window_end: float) -> None:
        self.requests = requests
        self.next = 0
        self.repeated = 0
        self.window_start = window_start
        self.window_end = window_end
        self.ops = 0
        self.errors = 0
        self.first_error = ""
        self.latencies: list[float] = []
        self.open = 0
        self.all_done = asyncio.get_running_loop().create_future()

    def take(self) -> bytes:
        """The next delivery; past the last, they are sent again (and counted: a repeat is a duplicate)."""
        i = self.next
        self.next += 1
        if i >= len(self.requests):
            self.repeated += 1
        return self.requests[i % len(self.requests)]

    def answered(self, response: Response, sent: float, now: float) -> None:
        if not self.window_start <= now <= self.window_end:
            return
        if response.status == 200:
            self.ops += 1
            self.latencies.append(now - sent)
            return
        self.errors += 1
        if not self.first_error:
            self.first_error = f"HTTP {response.status}: {response.body[:300].decode(errors='replace')}"

    def dropped(self, why: str) -> None:
        self.errors += 1
        self.first_error = self.first_error or why

    def closed(self) -> None:
        self.open -= 1
        if self.open == 0 and not self.all_done.done():
            self.all_done.set_result(None)


class Connection(asyncio.Protocol):
    """One keep-alive connection, one request in flight."""

    def __init__(self, tally: Tally) -> None:
        self.tally = tally
        self.buffer = bytearray()
        self.sent = 0.0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but have its methods.
        self.transport = cast(asyncio.Transport, transport)

    def send(self) -> None:
        assert self.transport is not None
        if time.perf_counter() >= self.tally.window_end:
            self.transport.close()
            return
        self.sent = time.perf_counter()
        self.transport.write(self.tally.take())

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        response = split_response(self.buffer)
        if response is None:
            return
        del self.buffer[: response.size]
        self.tally.answered(response, self.sent, time.perf_counter())
        self.send()

    def connection_lost(self, exc: Exception | None) -> None:
        if time.perf_counter() < self.tally.window_end:
            # The server closed a connection mid-run: one connection fewer for the rest of the window.
            self.tally.dropped(f"connection closed by the server: {exc or 'EOF'}")
        self.tally.closed()


def emit(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


async def run(spec: Spec) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    requests = signed_requests(f"{spec.host}:{spec.port}", spec.secret, spec.prefix, spec.deliveries)
    emit("ready", deliveries=len(requests))
    conns: list[Connection] = []
    # The window's clock starts once every connection is open: connecting is not measured.
    tally = Tally(requests, 0.0, float("inf"))
    for _ in range(spec.connections):
        _, conn = await loop.create_connection(lambda: Connection(tally), spec.host, spec.port)
        conns.append(conn)
    tally.open = len(conns)
    began = time.perf_counter()
    tally.window_start = began + spec.warmup_s
    tally.window_end = tally.window_start + spec.duration_s
    for conn in conns:
        conn.send()
    await asyncio.sleep(max(0.0, tally.window_start - time.perf_counter()))
    cpu_start = _own_cpu()
    emit("window_start")
    await asyncio.sleep(max(0.0, tally.window_end - time.perf_counter()))
    cpu = _own_cpu() - cpu_start
    emit("window_end")
    try:
        await asyncio.wait_for(tally.all_done, DRAIN_SECONDS)
    except TimeoutError:
        for conn in conns:
            if conn.transport is not None:
                conn.transport.abort()
    seconds = spec.duration_s
    lat = sorted(tally.latencies)
    return {
        "ops": tally.ops,
        "seconds": seconds,
        "errors": tally.errors,
        "first_error": tally.first_error,
        "p50_ms": percentile_ms(lat, 0.50),
        "p90_ms": percentile_ms(lat, 0.90),
        "p99_ms": percentile_ms(lat, 0.99),
        "deliveries": len(requests),
        "sent": tally.next,
        "repeated": tally.repeated,
        "connections": spec.connections,
        "cpu_us_per_op": 1e6 * cpu / tally.ops if tally.ops else None,
        "loop": type(loop).__module__.split(".")[0],
    }


def _own_cpu() -> float:
    times = os.times()
    return times.user + times.system


def main(argv: list[str]) -> int:
    spec = Spec.parse(argv[1])
    try:
        import uvloop
    except ImportError:
        result = asyncio.run(run(spec))
    else:
        result = uvloop.run(run(spec))
    emit("result", **result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
