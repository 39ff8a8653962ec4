"""inboxd's benchmark harness (issues 10, 13, 14, 27-29): what inboxd costs over raw PostgreSQL, and beside its peers.

Never part of the test suite or CI: it takes minutes, wants a quiet machine
and installs its own extras (`pip install -e '.[bench]'`: py-spy, uvloop,
matplotlib, PgQueuer, Procrastinate).

Commands (from the repository root):

    make bench          # python -m bench run:   inboxd against raw PostgreSQL, with profiles, about 16 min
    make bench-peers    # python -m bench peers: inboxd beside four PostgreSQL queues, about 10 min
    make bench-quick    # both with --quick: a smoke run; results in bench/results/quick/, never published
    python -m bench profile         # only the server profiles: the "before" of a change
    python -m bench report          # rewrite docs/benchmarks.md and .png from bench/results/*.json

What a run does:

- starts its own PostgreSQL (fsync and synchronous_commit on) in a fresh
  folder under /tmp, removed afterwards; migrates inboxd's schema into
  `inboxd` (the real server's) and `inboxd_raw` (the raw baseline's);
- runs `python -m inboxd serve` as a subprocess (`--workers 1` when the
  server has the flag) and finds out what else the server can do
  (support.py), so a figure it cannot serve is reported as not measured;
- drives every gRPC throughput figure from a Node process
  (loadgen/loadgen.mjs), meant to cost less CPU per call than the server
  (the page shows whether it did: a target of its own); the raw baseline
  and the peers run in this process (psycopg, uvloop);
- measures each figure in a closed loop over a fixed window after a
  warm-up, with the CPU time of the server, PostgreSQL and the generator
  over that window; profiles the server with py-spy in windows of its own;
- writes bench/results/<kind>.json, then docs/benchmarks.md and
  docs/benchmarks.png from whichever results exist.

Modules: `config` (sizes), `run` (a run: cluster, server, probe, figures),
`suites` and `peer_suite` (the order of the phases), `phases/` (accept,
streams, claim, work, profiling, startup, idle, idle_streams, scaling,
flow, history, bulk, tracing), `node_load` and `loadgen/` (the Node generator; `streams.mjs`
its AcceptStream and Work workloads), `grpc_load` (grpc.aio callers:
wake-up, long-polls, the peers' Python side), `work_streams` (Work streams
from this process: the probes, wake-up, recovery), `peer_work` (the drain
through Work), `raw` (the raw baseline), `plans`
(EXPLAIN of the claim, generic and custom), `profiles` (py-spy), `support`,
`cluster`, `server`, `cpu`, `loop`, `workload`, `history`, `longpolls`,
`peers` and `peer_enqueue`, `node_peers` and `peers-node/` (pg-boss and
graphile-worker in Node), `peer_latency` (enqueue -> start, every system),
`peer_targets` and `report_peers`, `record` (a stored figure), `figures`,
`flow_ledger` (issue 28's counts from the claims ledger, the rules it
sets), `flow_workers` (grpc.aio workers that keep claiming under a rule),
`phases.flow_baseline` (fair claiming beside the claim statement at 37c09d5),
`targets`, `stream_targets`, `raw_body_targets`, `flow_targets`,
`bulk_targets` and `tracing_targets` (what is compared with what),
`report`, `report_sections`, `report_streams`, `report_flow`,
`report_bulk`, `report_tracing` and `chart` (the page), `otlp_sink` (the
tracing phase's OTLP receiver, in its own process).

The edge (issue 44): `phases/edge` (the bare app, one edge process and
`--workers 2` in alternating windows, then the edge's profile),
`edge_requests` (the signed GitHub deliveries, answers framed),
`edge_loadgen` (the HTTP/1.1 generator, a process of its own), `bare_app`
(the aiohttp floor), `edge_procs` (starting them, a generator run under the
CPU probe), `edge_targets` and `report_edge` (its rows and its section).
"""
