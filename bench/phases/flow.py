"""Flow control (issue 28): fairness, the every-namespace plan, max_in_flight, rate, and what rules cost a drain.

Each figure's count is read from PostgreSQL (the claims ledger, EXPLAIN),
never from a timer: see bench/flow_ledger.py. Rules are written straight
into inbox_flow_rules, as SetFlowControl would write them, and cleared after
each figure, so no later phase claims under them. A figure that fails is left
unmeasured with its reason (run.extra["flow_unmeasured"]), and the others
are still measured.
"""

from __future__ import annotations

import asyncio
import logging
import statistics
from collections.abc import Awaitable, Callable
from typing import Any, LiteralString

import psycopg

from bench import flow_ledger as ledger
from bench import support
from bench.cluster import execute
from bench.flow_workers import accept, claim_until_seen, separate_stubs, work_until
from bench.grpc_load import stubs
from bench.phases.claim import CLAIM_NS, claim_load, inboxd_claim_figure, prefill
from bench.phases.flow_baseline import fair_over_before
from bench.plans import explain_claim
from bench.record import combined
from bench.run import Run
from bench.workload import CLEAR_EVENTS, EVENT_TYPE, PAYLOAD_BYTES, RUN_ID, Keys

log = logging.getLogger("bench")

FAIRNESS = "flow.fairness"
PLAN = "flow.plan.every_namespace"
IN_FLIGHT = "flow.max_in_flight"
RATE = "flow.rate"
DRAIN_RULES = "flow.drain.rules"
DRAIN_NONE = "flow.drain.norules"
UNMEASURED = "flow_unmeasured"

NOISY, QUIET = "bench/flow-noisy", "bench/flow-quiet"
QUIET_EVENTS = 10
BATCH = 10
LIMITED = "bench/flow-limited"
MAX_IN_FLIGHT = 5
RATED = "bench/flow-rated"
RATE_PER_S = 50.0
RATE_BURST = 10
# The rate's window opens this long after the first claim: the burst is spent by then.
RATE_SKIP_S = 1.0
FLOW_WORKERS = 16
SERVER_PROCESSES = 4
EVENTS_PER_NAMESPACE = 3
# EXPLAIN ANALYZE runs of the every-namespace Claim whose median is its figure.
PLAN_SAMPLES = 15

# Events of `n` namespaces, `per` each, straight into the table (as bench/workload.py's prefill).
PREFILL_MANY: LiteralString = """
INSERT INTO inbox_events (namespace, event_key, event_type, raw_payload, state, accepted_at,
                          available_at, due_at, updated_at)
SELECT 'bench/flow-many/' || lpad((g %% %(n)s)::text, 6, '0'), %(prefix)s || g, %(event_type)s, %(payload)b,
       'pending', now(), now() - (%(total)s - g) * interval '1 microsecond',
       now() - (%(total)s - g) * interval '1 microsecond', now()
FROM generate_series(1, %(total)s) AS g
"""


async def flow_phase(run: Run) -> None:
    figures: list[tuple[str, Callable[[Run], Awaitable[None]]]] = [
        (FAIRNESS, fairness_figure),
        (PLAN, plan_figure),
        (IN_FLIGHT, processes_figures),
        (DRAIN_NONE, drain_figures),
        ("flow.claim10", lambda r: fair_over_before(r, r.config.flow_rounds)),
    ]
    for name, measure in figures:
        try:
            await measure(run)
        except Exception as exc:
            log.exception("flow: %s failed", name)
            run.extra.setdefault(UNMEASURED, {})[name] = f"{type(exc).__name__}: {exc}"[:500]
        finally:
            await ledger.clear_rules(run.url)
    await execute(run.url, CLEAR_EVENTS)


async def fairness_figure(run: Run) -> None:
    """A quiet namespace's 10 events accepted after another's backlog; one worker Claims every namespace."""
    await execute(run.url, CLEAR_EVENTS)
    noisy = run.config.flow_noisy
    keys = Keys("flow-fair")
    async with stubs(run.target) as [stub]:
        await accept(stub, NOISY, noisy, keys)
        await accept(stub, QUIET, QUIET_EVENTS, keys)
        tally = await claim_until_seen(stub, BATCH, QUIET, QUIET_EVENTS, noisy + QUIET_EVENTS)
    found = ledger.handed_out_before_last(await ledger.ledger(run.url, [NOISY, QUIET]), NOISY, QUIET)
    if found["quiet_handed_out"] < QUIET_EVENTS:
        raise RuntimeError(
            f"the worker was handed {found['quiet_handed_out']} of the quiet namespace's {QUIET_EVENTS} events "
            f"(and {tally.seen.get(NOISY, 0)} of the noisy one's) before a Claim came back empty"
        )
    run.figures[FAIRNESS] = {
        "value": float(found["noisy_first"]),
        "unit": "events",
        "noisy": noisy,
        "quiet": QUIET_EVENTS,
        "batch": BATCH,
        "completed": tally.completed,
    }
    log.info("flow fairness: %d of the noisy namespace's events handed out first", found["noisy_first"])


async def plan_figure(run: Run) -> None:
    """EXPLAIN (ANALYZE, BUFFERS) of a Claim over every namespace, 10,000 of them holding backlog."""
    await execute(run.url, CLEAR_EVENTS)
    n = run.config.flow_namespaces
    async with await psycopg.AsyncConnection.connect(run.url, autocommit=True) as conn:
        params = {"n": n, "total": n * EVENTS_PER_NAMESPACE, "prefix": f"{RUN_ID}-flow-many-"}
        await conn.execute(PREFILL_MANY, {**params, "event_type": EVENT_TYPE, "payload": PAYLOAD_BYTES})
        await conn.execute("VACUUM (ANALYZE) inbox_events")
    # One execution's time is a sample of a noisy clock (one run of 24 ranged 1.5 to 3.6 ms): the figure is
    # the median of PLAN_SAMPLES, each on a connection of its own after one warming execution (explain_claim).
    samples = [await explain_claim(run.url, "", BATCH, "generic") for _ in range(PLAN_SAMPLES)]
    times = sorted(plan["execution_ms"] for plan in samples)
    generic = {**samples[-1], "execution_ms": statistics.median(times), "samples_ms": times}
    custom = await explain_claim(run.url, "", BATCH, "custom")
    for plan in (*samples, custom):
        if plan["rows_out"] < BATCH:
            # A Claim that hands out less than it could is not the Claim the figure is about.
            raise RuntimeError(f"the explained Claim ({plan['mode']}) handed out {plan['rows_out']}, not {BATCH}")
    run.figures[PLAN] = {
        "value": generic["execution_ms"],
        "unit": "ms",
        "namespaces": n,
        "events_per_namespace": EVENTS_PER_NAMESPACE,
        "max_events": BATCH,
        "generic": generic,
        "custom": custom,
    }
    log.info(
        "flow plan: generic %.2f ms (median of %d, %.2f to %.2f), %d rows read",
        generic["execution_ms"], len(times), times[0], times[-1], generic["rows_read"],
    )  # fmt: skip
    await execute(run.url, CLEAR_EVENTS)


async def processes_figures(run: Run) -> None:
    """max_in_flight and rate, each on one namespace, 16 workers over a server of 4 processes."""
    missing = support.lacks(run.support, support.WORKERS)
    if missing is not None:
        for name in (IN_FLIGHT, RATE):
            run.extra.setdefault(UNMEASURED, {})[name] = f"no server of {SERVER_PROCESSES} processes: {missing}"
        return
    server = await run.start_server(workers=SERVER_PROCESSES)
    try:
        await _guarded(run, IN_FLIGHT, lambda: in_flight_figure(run, server.target))
        await ledger.clear_rules(run.url)
        await _guarded(run, RATE, lambda: rate_figure(run, server.target))
    finally:
        await asyncio.to_thread(server.stop)


async def _guarded(run: Run, name: str, measure: Callable[[], Awaitable[None]]) -> None:
    try:
        await measure()
    except Exception as exc:
        log.exception("flow: %s failed", name)
        run.extra.setdefault(UNMEASURED, {})[name] = f"{type(exc).__name__}: {exc}"[:500]


async def in_flight_figure(run: Run, target: str) -> None:
    events = run.config.flow_in_flight_events
    await prefill(run.url, events, "flow-limited", namespace=LIMITED)
    await ledger.set_rules(run.url, [ledger.rule_row(LIMITED, max_in_flight=MAX_IN_FLIGHT)])
    # Seen on a busy 2-core machine: about 40 events/s through 5 slots (each lease a loaded round trip).
    # A server that drains slower than 20/s is stopped here, and the figure says how far it got.
    cap = max(60.0, events / 20)
    async with separate_stubs(target, FLOW_WORKERS) as workers:
        tally, seconds = await work_until(workers, [LIMITED], BATCH, until_completed=events, seconds=cap)
    rows = await ledger.ledger(run.url, [LIMITED])
    intervals = [(at, end) for _ns, at, end in rows]
    most = ledger.max_overlap(intervals)
    stretches = ledger.stretches_above(intervals, MAX_IN_FLIGHT)
    run.figures[IN_FLIGHT] = {
        "value": float(most),
        "unit": "leases",
        "max_in_flight": MAX_IN_FLIGHT,
        "events": events,
        "claims": len(rows),
        "completed": tally.completed,
        "empty_claims": tally.empty,
        "seconds": round(seconds, 3),
        "timed_out": tally.completed < events,
        "seconds_above_limit": round(ledger.time_above(intervals, MAX_IN_FLIGHT), 6),
        "stretches_above_limit": len(stretches),
        "longest_above_limit_s": round(max(stretches, default=0.0), 6),
        "workers": FLOW_WORKERS,
        "server_processes": SERVER_PROCESSES,
    }
    log.info("flow max_in_flight %d: at most %d leases at once (%d claims)", MAX_IN_FLIGHT, most, len(rows))


async def rate_figure(run: Run, target: str) -> None:
    window = run.config.flow_rate_seconds
    # More than the rule lets out over the whole run, with room: a server that ignores it drains these.
    events = max(5_000, int(3 * RATE_PER_S * (window + RATE_SKIP_S)))
    await prefill(run.url, events, "flow-rated", namespace=RATED)
    await ledger.set_rules(run.url, [ledger.rule_row(RATED, rate=RATE_PER_S, burst=RATE_BURST)])
    async with separate_stubs(target, FLOW_WORKERS) as workers:
        tally, seconds = await work_until(workers, [RATED], BATCH, until_completed=0, seconds=window + 2 * RATE_SKIP_S)
    times = [at for _ns, at, _end in await ledger.ledger(run.url, [RATED])]
    if not times:
        raise RuntimeError("no event of the rated namespace was handed out")
    start = min(times) + RATE_SKIP_S
    per_second = ledger.per_second(times, start, window)
    rate = ledger.rate_in_window(times, start, window)
    run.figures[RATE] = {
        "value": round(rate, 2),
        "unit": "events/s",
        "rate": RATE_PER_S,
        "burst": RATE_BURST,
        "window_s": window,
        "skipped_s": RATE_SKIP_S,
        "in_window": ledger.count_in_window(times, start, window),
        "per_second": per_second,
        "claims": len(times),
        "prefilled": events,
        "empty_claims": tally.empty,
        "seconds": round(seconds, 3),
        "workers": FLOW_WORKERS,
        "server_processes": SERVER_PROCESSES,
    }
    log.info("flow rate %.0f/s: %.2f events/s over %.0f s", RATE_PER_S, rate, window)


def other_rules(n: int) -> list[dict[str, Any]]:
    """`n` rules none of which governs the drain's namespace: names beside it, and patterns that nearly match it."""
    names = [ledger.rule_row(f"bench/other-{i}", max_in_flight=5, rate=100.0, burst=10) for i in range(n // 2)]
    near = ["bench/claim-*", "bench/claim/*", "*/claimed", "other/*"]
    patterns = [ledger.rule_row(p, max_in_flight=3, weight=2) for p in near]
    patterns += [ledger.rule_row(f"tenant-{i}/*", rate=10.0) for i in range(n - len(names) - len(patterns))]
    return names + patterns


def drain_order(rounds: int) -> list[str]:
    """No rules, rules, rules, no rules: `rounds` times over."""
    return [DRAIN_NONE, DRAIN_RULES, DRAIN_RULES, DRAIN_NONE] * rounds


async def drain_figures(run: Run) -> None:
    """The Claim 10 -> Complete drain of inboxd.claim10, with no rules and with rules on other namespaces.

    In windows A B B A (`flow_rounds` times over), each figure its windows
    combined: one window of each, the rules' after the none's, moved the
    ratio from run to run by more than the cost it is there to show (0.90x,
    1.07x, 0.97x, then 0.89x at bbb6f0b on a quiet machine).
    """
    load = claim_load(run, BATCH)
    rules = other_rules(run.config.flow_other_rules)
    windows: dict[str, list[dict[str, Any]]] = {DRAIN_NONE: [], DRAIN_RULES: []}
    order = drain_order(run.config.flow_rounds)
    for position, name in enumerate(order):
        if name == DRAIN_RULES:
            await ledger.set_rules(run.url, rules)
        else:
            await ledger.clear_rules(run.url)
        await inboxd_claim_figure(run, name, load, f"flow-drain-{position}")
        windows[name].append({**run.figures[name], "position": position})
    order_shown = "".join("A" if name == DRAIN_NONE else "B" for name in order)
    for name, taken in windows.items():
        run.figures[name] = {**combined(taken), "order": order_shown}
    run.figures[DRAIN_RULES]["rules"] = run.config.flow_other_rules
    run.figures[DRAIN_RULES]["namespace"] = CLAIM_NS
