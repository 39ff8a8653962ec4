"""Accept, AcceptBatch, duplicates and the empty RPC: each inboxd figure right after its raw baseline."""

from __future__ import annotations

from bench import raw
from bench.cluster import checkpoint
from bench.run import Run
from bench.workload import Keys

ACCEPT_NS = "bench/accept"


async def accept_phase(run: Run) -> None:
    c = run.config
    top = max(c.concurrency)
    remembered: list[str] = []
    for clients in c.concurrency:
        keys = Keys(f"raw-insert-{clients}", remember=clients == top)
        async with raw.connections(run.raw_url, clients) as conns:
            await run.measure_steps(f"raw.insert.c{clients}", raw.insert_one_steps(conns, ACCEPT_NS, keys), "tx/s")
        if keys.remember:
            remembered = keys.issued
        load = run.node("accept", clients, namespace=ACCEPT_NS, prefix=f"accept-{clients}")
        await run.measure_node(f"inboxd.accept.c{clients}", load, "tx/s")

    # The floor under every inboxd figure: an RPC that does no inboxd work, same generator, same callers.
    await run.measure_node(f"inboxd.empty_rpc.c{top}", run.node("health", top), "tx/s")

    keys = Keys("raw-insert-batch")
    async with raw.connections(run.raw_url, c.batch_clients) as conns:
        steps = raw.insert_many_steps(conns, ACCEPT_NS, keys, c.batch_rows)
        await run.measure_steps("raw.insert_batch", steps, "rows/s")
    load = run.node("accept_batch", c.batch_clients, namespace=ACCEPT_NS, rows=c.batch_rows, prefix="accept-batch")
    await run.measure_node("inboxd.accept_batch", load, "rows/s")

    async with raw.connections(run.raw_url, top) as conns:
        await run.measure_steps(f"raw.duplicate.c{top}", raw.duplicate_steps(conns, ACCEPT_NS, remembered), "tx/s")
        # The baseline a repeat must now meet: its COMMIT flushes a WAL record, as inboxd's repeats do.
        durable = raw.duplicate_steps(conns, ACCEPT_NS, remembered, raw.INSERT_ONE_DURABLE)
        await run.measure_steps(f"raw.duplicate_durable.c{top}", durable, "tx/s")
    load = run.node("duplicate", top, namespace=ACCEPT_NS, prefix="duplicate")
    await run.measure_node(f"inboxd.duplicate.c{top}", load, "tx/s")
    await checkpoint(run.url)
