"""Enqueue beside the peers: single events and batches of 100, from N concurrent callers, in a closed loop.

PgQueuer and Procrastinate are Python libraries: their callers run in this
process, on the same closed loop (bench/loop.py) and the same uvloop as the
raw baseline, each caller with its own connection. inboxd is measured twice:
with the Node generator of `make bench` (its client costs less than its
server), and with grpc.aio callers in this process, the same generator class
as the peers.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import psycopg

from bench.grpc_load import Stub, accept_batch_steps, accept_steps
from bench.loop import Step
from bench.workload import PAYLOAD, PAYLOAD_BYTES, Keys

ENQUEUE_NS = "bench/peers-enqueue"
ENTRYPOINT = "noop"


def inboxd_python_steps(stub: Stub, callers: int, rows: int, phase: str) -> list[Step]:
    keys = Keys(phase)
    if rows == 1:
        return accept_steps(stub, callers, ENQUEUE_NS, keys)
    return accept_batch_steps(stub, callers, ENQUEUE_NS, keys, rows)


@contextlib.asynccontextmanager
async def pgqueuer_steps(url: str, callers: int, rows: int) -> AsyncIterator[list[Step]]:
    """PgQueuer's Queries.enqueue, one connection per caller: one job, or `rows` in one call."""
    from pgqueuer import Queries

    conns = [await psycopg.AsyncConnection.connect(url, autocommit=True) for _ in range(callers)]

    def step_for(conn: psycopg.AsyncConnection[Any]) -> Step:
        queries = Queries.from_psycopg_connection(conn)

        async def one() -> int:
            await queries.enqueue(ENTRYPOINT, PAYLOAD_BYTES, 0)
            return 1

        async def many() -> int:
            await queries.enqueue([ENTRYPOINT] * rows, [PAYLOAD_BYTES] * rows, [0] * rows)
            return rows

        return one if rows == 1 else many

    try:
        yield [step_for(conn) for conn in conns]
    finally:
        for conn in conns:
            await conn.close()


@contextlib.asynccontextmanager
async def procrastinate_steps(url: str, callers: int, rows: int) -> AsyncIterator[list[Step]]:
    """Procrastinate's defer_async (batch_defer_async for `rows`), over a pool of one connection per caller."""
    import procrastinate

    app = procrastinate.App(
        connector=procrastinate.PsycopgConnector(conninfo=url, min_size=callers, max_size=callers),
    )

    @app.task(name=ENTRYPOINT, queue="bench-enqueue")
    async def noop(payload: str) -> None:
        pass

    async def one() -> int:
        await noop.defer_async(payload=PAYLOAD)
        return 1

    jobs: list[dict[str, Any]] = [{"payload": PAYLOAD} for _ in range(rows)]

    async def many() -> int:
        await noop.batch_defer_async(*jobs)
        return rows

    await app.open_async()
    try:
        yield [one if rows == 1 else many] * callers
    finally:
        await app.close_async()
