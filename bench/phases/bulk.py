"""Bulk operations (issue 30): 50,000 dead letters replayed at 2,000/s, and what Claims of another namespace feel.

The dead letters are written straight into inbox_events (as a Fail with
permanent=true leaves them: DEAD_LETTERED, attempts spent, last_error set,
no claim), in a namespace of the phase's own, beside a PENDING backlog in
another. Steady claimers (grpc.aio in this process: Claim 10 with no wait,
then CompleteBatch of what it handed out) work the backlog for a window
before the operation (idle), then the operation is started over the admin
API at its rate and the same claimers go on until it ends (during). The
counts are PostgreSQL's: the audit rows naming the operation
(inbox_replays.bulk_operation) and GetBulkOperation's; only the Claim
latencies are this process's clock.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any, LiteralString

import grpc
import psycopg

from bench.cluster import checkpoint, execute
from bench.cpu import CpuProbe
from bench.flow_workers import Tally
from bench.grpc_load import Stub, summarize_ms
from bench.phases.claim import prefill
from bench.run import Run
from bench.workload import CLEAR_EVENTS, EVENT_TYPE, PAYLOAD_BYTES, RUN_ID
from inboxd_client.v1 import admin_pb2, inbox_pb2, inbox_pb2_grpc
from inboxd_client.v1.admin_pb2_grpc import InboxAdminServiceStub

log = logging.getLogger("bench")

RATE = "bulk.rate"
CHANGED = "bulk.changed"
CLAIM_IDLE = "bulk.claim.idle"
CLAIM_DURING = "bulk.claim.during"
UNMEASURED = "bulk_unmeasured"
NAMES = (RATE, CHANGED, CLAIM_IDLE, CLAIM_DURING)

DEAD_NS = "bench/bulk-dead"
CLAIM_NS = "bench/bulk-claims"
BATCH = 10
ERROR = "SMTP timeout: 421 4.4.2 connection dropped"
REASON = "bench: replay after the SMTP outage"
# How often the phase asks GetBulkOperation whether the operation has ended.
POLL_S = 0.2

# Dead letters as a permanent Fail leaves them: the constraints of schema.sql hold (no due time once
# not open, no claim), attempts spent, the error kept; accepted a microsecond apart, oldest first.
PREFILL_DEAD: LiteralString = """
INSERT INTO inbox_events (namespace, event_key, event_type, raw_payload, state, accepted_at, available_at,
                          due_at, updated_at, attempt, fencing_token, worker_id, last_error)
SELECT %(namespace)s, %(prefix)s || g, %(event_type)s, %(payload)b, 'dead_lettered',
       now() - interval '1 hour' - (%(n)s - g) * interval '1 microsecond',
       now() - interval '1 hour', NULL, now() - interval '30 minutes', 5, 5, 'bench-worker', %(error)s
FROM generate_series(1, %(n)s) AS g
"""

AUDIT: LiteralString = """
SELECT count(*), count(DISTINCT (namespace, event_key)),
       extract(epoch FROM min(replayed_at))::float8, extract(epoch FROM max(replayed_at))::float8
FROM inbox_replays WHERE bulk_operation = %(op)s
"""
AUDIT_TIMES: LiteralString = """
SELECT extract(epoch FROM replayed_at)::float8 FROM inbox_replays WHERE bulk_operation = %(op)s
"""
# What the replayed events became: PENDING, marked replayed, and when they come due (spaced at the rate).
REPLAYED: LiteralString = """
SELECT count(*) FILTER (WHERE state = 'pending' AND replayed AND attempt = 0),
       extract(epoch FROM max(due_at) - min(due_at))::float8
FROM inbox_events WHERE namespace = %(namespace)s
"""


@dataclass
class Claims:
    """Every Claim the claimers made: when it began, how long it took, whether it came back empty."""

    calls: list[tuple[float, float, bool]] = field(default_factory=list)
    tally: Tally = field(default_factory=Tally)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    def window(self, start: float, end: float) -> list[tuple[float, float, bool]]:
        return [c for c in self.calls if start <= c[0] < end]


def claim_figure(calls: list[tuple[float, float, bool]], seconds: float, **extra: Any) -> dict[str, Any]:
    """The Claims of one window as a stored figure: calls per second, latencies, how many came back empty."""
    latencies = [took for _began, took, _empty in calls]
    shown = {k: round(v, 3) for k, v in summarize_ms(latencies).items()}
    return {
        "value": shown["p99_ms"],
        "unit": "ms",
        "ops": len(calls),
        "seconds": round(seconds, 3),
        "calls_per_s": round(len(calls) / seconds, 1) if seconds > 0 else 0.0,
        "empty_claims": sum(1 for c in calls if c[2]),
        "errors": 0,
        **shown,
        **extra,
    }


def audit_rate(times: list[float]) -> float:
    """Events per second between the first chunk's audit time and the last's: the last chunk's rows are after it.

    Every row of a chunk carries its transaction's time, so the span from the
    first to the last holds every chunk but the last one.
    """
    if not times:
        return 0.0
    first, last = min(times), max(times)
    before_last = sum(1 for t in times if t < last)
    return before_last / (last - first) if last > first else 0.0


async def seed(run: Run) -> None:
    c = run.config
    await execute(run.url, CLEAR_EVENTS)
    await prefill(run.url, c.bulk_claim_backlog, "bulk-claims", namespace=CLAIM_NS, clear=False, analyze=False)
    async with await psycopg.AsyncConnection.connect(run.url, autocommit=True) as conn:
        params = {
            "namespace": DEAD_NS,
            "prefix": f"{RUN_ID}-bulk-dead-",
            "event_type": EVENT_TYPE,
            "payload": PAYLOAD_BYTES,
            "n": c.bulk_events,
            "error": ERROR,
        }
        await conn.execute(PREFILL_DEAD, params)
        await conn.execute("VACUUM (ANALYZE) inbox_events")
    await checkpoint(run.url)


async def claimers(stub: Stub, n: int, claims: Claims) -> None:
    """`n` callers, each Claim 10 (no wait) then CompleteBatch of its events, until told to stop."""

    async def one(index: int) -> None:
        request = inbox_pb2.ClaimRequest(namespaces=[CLAIM_NS], max_events=BATCH, worker_id=f"bench-bulk-{index}")
        while not claims.stop.is_set():
            began = time.perf_counter()
            answer = await stub.Claim(request)
            claims.calls.append((began, time.perf_counter() - began, not answer.events))
            if answer.events:
                completions = [
                    inbox_pb2.CompleteRequest(namespace=e.namespace, event_key=e.event_key, claim_token=e.claim_token)
                    for e in answer.events
                ]
                await stub.CompleteBatch(inbox_pb2.CompleteBatchRequest(completions=completions))
                claims.tally.completed += len(answer.events)

    await asyncio.gather(*(one(i) for i in range(n)))


async def bulk_phase(run: Run) -> None:
    try:
        await measure(run)
    except Exception as exc:
        log.exception("bulk: failed")
        for name in NAMES:
            if name not in run.figures:
                run.extra.setdefault(UNMEASURED, {})[name] = f"{type(exc).__name__}: {exc}"[:500]
    finally:
        await execute(run.url, CLEAR_EVENTS)


async def measure(run: Run) -> None:
    c = run.config
    await seed(run)
    claims = Claims()
    async with grpc.aio.insecure_channel(run.target) as chan:
        await asyncio.wait_for(chan.channel_ready(), 30)
        stub = inbox_pb2_grpc.InboxServiceStub(chan)  # type: ignore[no-untyped-call]
        admin = InboxAdminServiceStub(chan)  # type: ignore[no-untyped-call]
        working = asyncio.create_task(claimers(stub, c.bulk_claimers, claims))
        try:
            await asyncio.sleep(c.warmup)
            idle_start, cpu_first = time.perf_counter(), run.probe.snapshot()
            await asyncio.sleep(c.duration)
            idle_end, cpu_idle = time.perf_counter(), run.probe.snapshot()
            operation, during_end, cpu_during = await replay(run, admin)
        finally:
            claims.stop.set()
            await working
    idle_cpu = CpuProbe.between(cpu_first, cpu_idle)
    during_cpu = CpuProbe.between(cpu_idle, cpu_during)
    idle_calls = claims.window(idle_start, idle_end)
    during_calls = claims.window(idle_end, during_end)
    run.figures[CLAIM_IDLE] = claim_figure(idle_calls, idle_end - idle_start, cpu=idle_cpu.to_json())
    run.figures[CLAIM_DURING] = claim_figure(during_calls, during_end - idle_end, cpu=during_cpu.to_json())
    for name in (CLAIM_IDLE, CLAIM_DURING):
        fig = run.figures[name]
        fig.update(claimers=c.bulk_claimers, max_events=BATCH, backlog=c.bulk_claim_backlog)
        if fig["empty_claims"]:
            # An empty Claim answers without a claim: its latency is not the one the figure is about.
            raise RuntimeError(f"{name}: {fig['empty_claims']} Claims came back empty: the claimers' backlog ran out")
    await counts(run, operation)
    i, d = run.figures[CLAIM_IDLE], run.figures[CLAIM_DURING]
    log.info("bulk claims: p99 idle %.2f ms, during %.2f ms", i["p99_ms"], d["p99_ms"])


async def replay(run: Run, admin: InboxAdminServiceStub) -> tuple[admin_pb2.BulkOperation, float, Any]:
    """Starts the REPLAY and waits for it to end; answers it as it ended, when that was seen, and the CPU then."""
    c = run.config
    request = admin_pb2.StartBulkOperationRequest(
        filter=admin_pb2.BulkFilter(namespace_pattern=DEAD_NS, error_contains="SMTP timeout"),
        action=admin_pb2.BULK_ACTION_REPLAY,
        reason=REASON,
        rate=c.bulk_rate,
    )
    started = await admin.StartBulkOperation(request)
    op_id = started.operation.id
    if started.operation.matched != c.bulk_events:
        raise RuntimeError(f"the operation matched {started.operation.matched} of {c.bulk_events} dead letters")
    # A run that falls far behind its rate is stopped: three times its planned length, and a minute more.
    deadline = time.perf_counter() + 3 * c.bulk_events / c.bulk_rate + 60
    while True:
        await asyncio.sleep(POLL_S)
        seen = (await admin.GetBulkOperation(admin_pb2.GetBulkOperationRequest(id=op_id))).operation
        if seen.state != admin_pb2.BULK_OPERATION_STATE_RUNNING:
            return seen, time.perf_counter(), run.probe.snapshot()
        if time.perf_counter() > deadline:
            await admin.CancelBulkOperation(admin_pb2.CancelBulkOperationRequest(id=op_id, reason="bench: too slow"))
            raise RuntimeError(f"the operation had changed {seen.done} of {seen.matched} when the phase gave up")


async def counts(run: Run, op: admin_pb2.BulkOperation) -> None:
    """The rate over the whole run and the events changed, from GetBulkOperation and the audit rows."""
    async with await psycopg.AsyncConnection.connect(run.url, autocommit=True) as conn:
        row = await (await conn.execute(AUDIT, {"op": op.id})).fetchone()
        times = [float(t) for (t,) in await (await conn.execute(AUDIT_TIMES, {"op": op.id})).fetchall()]
        replayed = await (await conn.execute(REPLAYED, {"namespace": DEAD_NS})).fetchone()
    assert row is not None and replayed is not None
    rows, distinct = int(row[0]), int(row[1])
    started = op.started_at.ToDatetime().timestamp()
    seconds = op.finished_at.ToDatetime().timestamp() - started
    first = min(times, default=0.0)
    per_second = [0] * (int(max(times, default=0.0) - first) + 1 if times else 0)
    for t in times:
        per_second[int(t - first)] += 1
    state = admin_pb2.BulkOperationState.Name(op.state)
    run.figures[RATE] = {
        "value": round(op.done / seconds, 1) if seconds > 0 else 0.0,
        "unit": "events/s",
        "rate": run.config.bulk_rate,
        "done": op.done,
        "seconds": round(seconds, 3),
        "measured_rate": round(op.measured_rate, 1),
        "audit_rate": round(audit_rate(times), 1),
        "per_second": per_second,
        "due_spread_s": round(float(replayed[1] or 0.0), 3),
        # From the start (the matches numbered in its transaction) to the first chunk's audit rows.
        "first_chunk_after_s": round(first - started, 3) if times else None,
        "state": state,
    }
    run.figures[CHANGED] = {
        "value": float(distinct),
        "unit": "events",
        "events": run.config.bulk_events,
        "audit_rows": rows,
        "distinct_events": distinct,
        "matched": op.matched,
        "done": op.done,
        "skipped": op.skipped,
        "pending_replayed": int(replayed[0]),
        "state": state,
    }
    log.info(
        "bulk replay %s: %d changed in %.1f s (%.0f/s; audit %d rows, %d events)",
        state,
        op.done,
        seconds,
        run.figures[RATE]["value"],
        rows,
        distinct,
    )
