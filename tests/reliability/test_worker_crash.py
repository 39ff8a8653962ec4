"""Scenario 6: workers SIGKILLed mid-handler lose no event; their leases expire and others finish the work.

Three worker processes (the Python `Worker`, 2 s leases renewed in the
background) claim from one namespace. Each handler announces itself, works,
then writes its business effect and completes the event in one transaction of
its own. Over and over, a worker with a handler in flight is SIGKILLed at a
seeded moment and a fresh one started. The killed worker's claims are never
finished or released: only lease expiry brings them back. In the end every
event is COMPLETED, leases were seen expiring and taken over, handlers ran more
often than there are events (delivery is at least once), and yet every event
has exactly one business effect.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from inboxd_client import accept_request
from tests.harness import eventually
from tests.reliability import ledger
from tests.reliability.crash_worker import EFFECTS_TABLE
from tests.reliability.rig import PyProcess, client, namespace, processes, query, serving, states

SCENARIO = "worker crash"
EVENTS = 150
WORKERS = 3
CONCURRENCY = 4
LEASE = 2.0
KILLS = 6
WORK_SECONDS = (0.2, 0.8)


def in_flight(proc: PyProcess) -> set[str]:
    """Keys whose handler started in `proc` and has not said it is done."""
    started = {line.split()[0] for line in proc.lines_starting("started ")}
    done = {line.split()[0] for line in proc.lines_starting("done ")}
    return started - done


def running_handler(proc: PyProcess) -> Callable[[], bool]:
    return lambda: bool(in_flight(proc))


async def test_events_claimed_by_workers_sigkilled_mid_handler_are_reclaimed_and_all_complete(
    reliable_url: str, tmp_path: Path
) -> None:
    tally = ledger.open_tally(SCENARIO)
    rng = ledger.rng_for(SCENARIO)
    ns = namespace(SCENARIO)
    keys = [f"job-{i:04d}" for i in range(EVENTS)]
    await query(reliable_url, EFFECTS_TABLE)

    async with serving(reliable_url) as server, processes() as started:

        def launch() -> PyProcess:
            argv = [
                "-m",
                "tests.reliability.crash_worker",
                server.target,
                reliable_url,
                ns,
                str(LEASE),
                str(CONCURRENCY),
            ]
            proc = PyProcess(argv, tmp_path / "workers.log")
            started.append(proc)
            return proc

        async with client(server.target) as inbox:
            requests = [
                accept_request(ns, k, "report.requested", {"id": k, "work": rng.uniform(*WORK_SECONDS)}) for k in keys
            ]
            acked: set[str] = set()
            for i in range(0, len(requests), 50):
                await inbox.accept_batch(requests[i : i + 50])
                acked.update(r.event_key for r in requests[i : i + 50])
        tally.deliveries += len(requests)

        live = [await launch().start() for _ in range(WORKERS)]

        async def all_completed() -> bool:
            found = await states(reliable_url, ns)
            return all(found.get(k) == "completed" for k in keys)

        kills = 0
        interrupted: set[str] = set()
        while kills < KILLS and not await all_completed():
            victim = rng.choice(live)
            try:
                await eventually(running_handler(victim), "the victim runs a handler", within=20.0, every=0.02)
            except AssertionError:
                break  # nothing left for it to work on: the events are done
            await asyncio.sleep(rng.uniform(0.0, 0.3))  # the seeded moment, not a wait for a condition
            caught = in_flight(victim)
            await victim.kill()
            kills += 1
            interrupted |= caught
            live[live.index(victim)] = await launch().start()

        await eventually(all_completed, "every event completed", within=90.0, every=0.25)
        for proc in live:
            await proc.stop()

    stored = await states(reliable_url, ns)
    completed = {k for k, state in stored.items() if state == "completed"}
    effects = await query(
        reliable_url,
        "SELECT event_key, count(*) FROM reliability_effects WHERE namespace = %s GROUP BY event_key",
        (ns,),
    )
    per_event = Counter({str(k): int(n) for k, n in effects})
    expired = await query(
        reliable_url, "SELECT count(*) FROM inbox_claims WHERE namespace = %s AND outcome = 'expired'", (ns,)
    )
    runs = sum(len(p.lines_starting("started ")) for p in started)

    tally.events += len(keys)
    tally.account(acked, completed)
    tally.duplicated += len(set(stored) - set(keys))
    tally.count_effects(per_event)
    tally.note("workers SIGKILLed", kills)
    tally.note("handlers cut off mid-run", len(interrupted))
    tally.note("leases expired and taken over", int(expired[0][0]))
    tally.note("handler runs", runs)

    assert kills >= KILLS // 2, f"only {kills} kills landed before the work ran out"
    assert interrupted, "no kill caught a handler mid-run"
    assert int(expired[0][0]) >= 1, "no lease expired, so no reclaim was tested"
    assert completed == set(keys)
    assert set(per_event) == set(keys), "an event completed without its business effect"
    tally.close()
