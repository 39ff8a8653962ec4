"""Tracing (issue 31): off against the code before tracing, and on (sampling everything) against off.

Three servers, each a fresh `inboxd serve` (one process) on the same
database: A, the server of commit 1bc5f2c, the last before tracing, from a
detached worktree of its own (bench/checkout.py proves its imports are that
folder's); B, this tree's with no OTEL_* variable; C, this tree's with every
span sampled and exported over OTLP/gRPC to a sink in its own process
(bench/otlp_sink.py). Windows run A B C C B A (`tracing_rounds` times), so
each server meets early and late moments of the run alike; each window is
Accept at 64 callers (the accept phase's Node load) and then the drain (the
work phase's Node load: 16 Work streams, credit 10, over a fresh backlog).
The backlog's events carry a stored traceparent, so a traced server makes
its hand-out span for each, as it would for events an edge delivered.
"""

from __future__ import annotations

import logging
import os
from typing import Any, LiteralString

import psycopg

from bench import support
from bench.checkout import Checkout, checked_out
from bench.cluster import checkpoint, execute
from bench.node_load import NodeLoad, run_node
from bench.otlp_sink import Sink, otlp_sink
from bench.phases.claim import prime_node
from bench.record import combined, from_node
from bench.run import Run
from bench.workload import CLEAR_EVENTS, EVENT_TYPE, PAYLOAD_BYTES, RUN_ID

log = logging.getLogger("bench")

BEFORE_COMMIT = "1bc5f2c"
BEFORE, OFF, ON = "before", "off", "on"
SERVERS = (BEFORE, OFF, ON)
ACCEPT_NS = "bench/tracing-accept"
DRAIN_NS = "bench/tracing-drain"
CALLERS = 64
CREDIT = 10
UNMEASURED = "tracing_unmeasured"
CHECKOUT = "tracing_before"


def figure_name(kind: str, server: str) -> str:
    return f"tracing.{kind}.{server}"


NAMES = tuple(figure_name(kind, s) for kind in ("accept", "drain") for s in SERVERS)

# Sampling everything; the batch processor's queue is made large enough that no span is dropped under
# load (the SDK's 2,048 would drop most at thousands of Accepts a second, and a dropped span costs less).
ON_ENV = {
    "OTEL_EXPORTER_OTLP_INSECURE": "true",
    "OTEL_TRACES_SAMPLER": "always_on",
    "OTEL_BSP_MAX_QUEUE_SIZE": "65536",
}

# A backlog as prefill's, each event with the W3C context an edge's Accept would have stored.
PREFILL_TRACED: LiteralString = """
INSERT INTO inbox_events (namespace, event_key, event_type, raw_payload, state, accepted_at,
                          available_at, due_at, updated_at, traceparent)
SELECT %(namespace)s, %(prefix)s || g, %(event_type)s, %(payload)b, 'pending',
       now(), now() - (%(n)s - g) * interval '1 microsecond',
       now() - (%(n)s - g) * interval '1 microsecond', now(),
       '00-' || md5('trace' || g) || '-' || left(md5('span' || g), 16) || '-01'
FROM generate_series(1, %(n)s) AS g
"""


def order(rounds: int) -> list[str]:
    """A B C C B A, `rounds` times over."""
    return [*SERVERS, *reversed(SERVERS)] * rounds


def otel_variables(environ: dict[str, str]) -> list[str]:
    return sorted(name for name in environ if name.startswith("OTEL_"))


def drain_load(run: Run) -> NodeLoad:
    if support.lacks(run.support, support.WORK) is None:
        return run.node("work", run.config.claim_workers, namespace=DRAIN_NS, credit=CREDIT, idle_ms=500)
    return run.node("claim_complete", run.config.claim_workers, namespace=DRAIN_NS, max_events=CREDIT)


async def prefill_traced(url: str, n: int, prefix: str) -> None:
    await execute(url, CLEAR_EVENTS)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        params = {"namespace": DRAIN_NS, "prefix": f"{RUN_ID}-{prefix}-", "event_type": EVENT_TYPE}
        await conn.execute(PREFILL_TRACED, {**params, "payload": PAYLOAD_BYTES, "n": n})
        await conn.execute("VACUUM (ANALYZE) inbox_events")


async def tracing_phase(run: Run) -> None:
    found = otel_variables(dict(os.environ))
    if found:
        # The servers inherit this process's environment: "off" would not be off.
        raise RuntimeError(f"unset {', '.join(found)} before the tracing phase: its 'off' server would inherit them")
    try:
        with checked_out(BEFORE_COMMIT) as before:
            run.extra[CHECKOUT] = {"commit": before.commit, "imported": before.imported}
            log.info("tracing: the server at %s imports %s", before.commit, before.imported["inboxd"])
            async with otlp_sink() as sink:
                run.probe.watch("otlp_sink", _sink_cpu(sink))
                try:
                    await windows(run, before, sink)
                finally:
                    run.probe.forget("otlp_sink")
    except Exception as exc:
        log.exception("tracing: failed")
        for name in NAMES:
            if name not in run.figures:
                run.extra.setdefault(UNMEASURED, {})[name] = f"{type(exc).__name__}: {exc}"[:500]
    finally:
        await execute(run.url, CLEAR_EVENTS)


def _sink_cpu(sink: Sink) -> Any:
    from bench.cpu import process_cpu_seconds

    pid = sink.proc.pid
    return lambda: process_cpu_seconds(pid)


async def windows(run: Run, before: Checkout, sink: Sink) -> None:
    c = run.config
    env = {BEFORE: before.env, OFF: {}, ON: {**ON_ENV, "OTEL_EXPORTER_OTLP_ENDPOINT": sink.endpoint}}
    found: dict[str, list[dict[str, Any]]] = {f"{kind}.{s}": [] for kind in ("accept", "drain") for s in SERVERS}
    spans: dict[str, int] = {}
    for position, server in enumerate(order(c.tracing_rounds)):
        first = await sink.spans()
        async with run.fresh_server(env[server]):
            await execute(run.url, CLEAR_EVENTS)
            await checkpoint(run.url)
            accept = run.node("accept", CALLERS, namespace=ACCEPT_NS, prefix=f"tracing-accept-{position}")
            accepted = from_node(await run_node(accept, run.probe), "tx/s", position=position)
            after_accept = await sink.spans()
            await prefill_traced(run.url, c.claim_prefill, f"tracing-drain-{position}")
            load = drain_load(run)
            await prime_node(run, run.url, load)
            await checkpoint(run.url)
            before_drain = await sink.spans()
            drained = from_node(await run_node(load, run.probe), "rows/s", position=position)
            last = await sink.spans()
        # The server flushes its batch processor as it stops: what it sent in all, start-up to stop.
        stopped = await sink.spans()
        found[f"accept.{server}"].append(accepted)
        found[f"drain.{server}"].append(drained)
        for kind, fig in (("accept", accepted), ("drain", drained)):
            log.info(
                "tracing %s %-6s window %d: %8.1f %s, server %.0f µs per unit",
                kind,
                server,
                position + 1,
                fig["value"],
                fig["unit"],
                _server_us(fig),
            )
        if server == ON:
            spans["accept"] = spans.get("accept", 0) + after_accept - first
            spans["drain"] = spans.get("drain", 0) + last - before_drain
            spans["total"] = spans.get("total", 0) + stopped - first
    if not spans.get("accept"):
        raise RuntimeError("the sink received no span from the server with tracing on: tracing was not on")
    for key, figs in found.items():
        kind, server = key.split(".")
        fig = combined(figs)
        fig["order"] = "".join("ABC"[SERVERS.index(s)] for s in order(c.tracing_rounds))
        fig["server"] = server
        if server == ON:
            # Spans the sink received while the load ran, warm-up included: approximate, as the batch
            # processor sends 512 at a time and the last of a load may come after the count that closes it.
            fig["spans_received"] = spans.get(kind, 0)
            fig["spans_server_sent"] = spans.get("total", 0)
        run.figures[figure_name(kind, server)] = fig


def _server_us(fig: dict[str, Any]) -> float:
    cpu = fig.get("cpu") or {}
    count = fig["units"] if fig["unit"] == "rows/s" else fig["ops"]
    return 1e6 * float(cpu.get("used", {}).get("server", 0.0)) / count if count else 0.0
