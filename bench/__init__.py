"""inboxd's benchmark harness (issue 10): what inboxd costs over raw PostgreSQL, and beside its peers.

Never part of the test suite or CI: it takes minutes, wants a quiet machine
and installs its own extras (`pip install -e '.[bench]'`).

Commands (from the repository root):

    make bench          # python -m bench run:   inboxd against raw PostgreSQL, about 5 min
    make bench-peers    # python -m bench peers: inboxd beside PgQueuer and Procrastinate, about 3 min
    python -m bench report          # rewrite docs/benchmarks.md and .png from bench/results/*.json
    python -m bench run --quick     # a smoke run: short windows, small history; writes nothing to docs/

What a run does:

- starts its own PostgreSQL (fsync and synchronous_commit on, as in
  production) in a fresh folder under /tmp, and removes it afterwards;
- migrates inboxd's schema into two databases: `inboxd` for the real server,
  `inboxd_raw` for the raw baseline, which runs the same SQL straight through
  psycopg (one AsyncConnection per client, autocommit) with no gRPC and no
  service in between;
- runs `python -m inboxd serve` as a subprocess; the load generator is this
  process, so server and clients never share one Python interpreter;
- measures each workload in a closed loop (every client sends its next
  request when the previous one is answered) over a fixed window after a
  warm-up, and records the CPU time the server, PostgreSQL and the load
  generator spent in that window;
- writes bench/results/<kind>.json, then docs/benchmarks.md and
  docs/benchmarks.png from whichever results exist.

Modules: `cluster` (PostgreSQL), `server` (the inboxd subprocess), `cpu`
(process accounting), `loop` (the closed-loop driver), `workload` (keys and
payload), `raw` and `grpc_load` (the two sides of each comparison),
`history` (5 million completed rows), `longpolls`, `peers`, `suite` (the
order of a run), `figures` (pairs, targets, console table), `report` (the
doc) and `chart` (the PNG).
"""
